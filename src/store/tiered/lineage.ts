/**
 * Which of two histories of a node's file is the newer, where their revisions do not compare.
 *
 * A file's lineage (sqlite/schema.ts `lineageOf`) names its history: a copy put back keeps it, a new
 * file (the old one lost, a new machine under the node's name) starts another. Revisions count within
 * one lineage only. A lineage carries a generation, `<generation>.<id>` (a bare id: generation 0): a
 * file that took over what another lineage published (tiered/file-check.ts) then moves to the
 * generation after every one it found, so the history that took over is the newer one:
 * - a new machine, or a file lost, takes the old file's publications over: its lineage is newer, and
 *   an old publication a restore of the cluster's data brings back later is not taken over its records;
 * - a copy put back from before a file was lost (an older generation) finds what the file after the
 *   loss published (a newer one): it takes that over, as it would a newer revision of its own history
 *   (found by the soak, etcd seed 3943: the copy was taken for newer, and an address the later file
 *   had handed out was handed out again).
 */

/** The generation of lineage `lineage`: its number before the first dot, 0 for a bare id or none. */
export function generationOf(lineage: string | undefined): number {
  const match = lineage === undefined ? null : /^(\d{1,15})\./.exec(lineage);
  return match === null ? 0 : Number(match[1]);
}

/**
 * The generation a file of lineage `mine` moves to once it took over what lineages `found` published
 * (other than its own); undefined when it stays (it found none, or only older ones).
 */
export function successorGeneration(
  mine: string | undefined,
  found: readonly (string | undefined)[],
): number | undefined {
  const others = found.filter((l): l is string => l !== undefined && l !== mine).map(generationOf);
  if (others.length === 0) return undefined;
  const top = Math.max(...others);
  return top >= generationOf(mine) ? top + 1 : undefined;
}
