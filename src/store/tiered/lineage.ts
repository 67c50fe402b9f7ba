/**
 * Which of two histories of a node's file is the newer, where their revisions do not compare.
 *
 * A file's lineage (sqlite/schema.ts `lineageOf`) names its history: a copy put back keeps it, a new
 * file (the old one lost, a new machine under the node's name) starts another, and revisions count
 * within one lineage only. So a file keeps its succession too: the lineages whose publications it
 * took over (tiered/file-check.ts), and a generation above each of theirs (a Lamport clock that
 * moves on takeovers only). Publications carry both (PublishedBlock.succession).
 *
 * A publication of another lineage is newer than the file only when it names the file's lineage
 * among those it took over *and* its generation is above the file's:
 * - a copy put back from before a loss finds what the file after the loss published: that file took
 *   the copy's lineage over (it adopted its publications), at a generation above it: newer, taken
 *   over whatever the revisions (found by the soak, etcd seed 3943 with state directories deleted:
 *   the copy was taken for the newer, and an address the later file had handed out went out again);
 * - a file that then takes that back over moves above it in turn, so a restore of the cluster's data
 *   that brings the older publication back later does not take it over the file's own records;
 * - a history that never took the file's over is not newer, whatever its generation: a new machine
 *   that found nothing to take over (its node forgotten) is not older than its predecessor's
 *   publications a restore brings back (soak, etcd seed 3943, an earlier try with generations alone).
 * Written by hand: it is Warren's own rule.
 */
import type { PublishedBlock } from '../cluster.ts';
import { NO_SUCCESSION, SUCCESSION_LIMIT, type Succession } from '../succession.ts';

/** Whether `block`, another lineage's, supersedes the file's history `lineage` at `mine` (the header's rule). */
export function supersedesFile(block: PublishedBlock, lineage: string | undefined, mine: Succession): boolean {
  if (lineage === undefined || block.lineage === undefined || block.lineage === lineage) return false;
  const theirs = block.succession ?? NO_SUCCESSION;
  return theirs.supersedes.includes(lineage) && theirs.generation > mine.generation;
}

/**
 * The file's succession once it took over `taken` (publications it merged, of any lineage): above
 * every other lineage's generation, as high as its own lineage's, naming theirs first; undefined
 * when it stays as it is.
 */
export function succeeded(lineage: string, mine: Succession, taken: readonly PublishedBlock[]): Succession | undefined {
  let generation = mine.generation;
  const named: string[] = [];
  for (const block of taken) {
    const theirs = block.succession ?? NO_SUCCESSION;
    const other = block.lineage !== undefined && block.lineage !== lineage;
    generation = Math.max(generation, theirs.generation + (other ? 1 : 0));
    if (other) named.push(block.lineage as string);
    named.push(...theirs.supersedes);
  }
  const supersedes = [...new Set([...named, ...mine.supersedes])]
    .filter((l) => l !== lineage)
    .slice(0, SUCCESSION_LIMIT);
  const same =
    generation === mine.generation &&
    supersedes.length === mine.supersedes.length &&
    supersedes.every((l, i) => l === mine.supersedes[i]);
  return same ? undefined : { generation, supersedes };
}
