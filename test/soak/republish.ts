/**
 * The soak's judgement of a publication deleted by hand (`publication-delete`, store-etcd.ts and
 * store-kube.ts): its
 * owner's watch tells it, and it writes the publication again at its next publication run, so the
 * step waits REPUBLISH_BOUND_MS for that. Not written again by then is a violation only when the
 * owner's agent ran all that while and no recovery stands: the candidates are chosen by their
 * node's announcement, which an agent killed -9 leaves behind until its lease runs out (the etcd
 * soak's seed 3943, step 1488: the agent killed three steps before, started again two steps after),
 * and while the store is in recovery no node writes.
 */

/** How long a publication deleted by hand may stay unwritten, in its owner's agent's running time. */
export const REPUBLISH_BOUND_MS = 15_000;
/** How often the step looks for it. */
export const REPUBLISH_POLL_MS = 200;

/**
 * Why a publication not written again within the bound is no violation, undefined when it is one:
 * `ranMs`, how long its owner's agent ran since the deletion; `stood`, what kept every node from
 * writing (the store in recovery), if anything did.
 */
export function unwrittenExcuse(o: {
  readonly ranMs: number;
  readonly stood?: string | undefined;
}): string | undefined {
  if (o.ranMs < REPUBLISH_BOUND_MS) return 'not written again while its agent was down (killed or stopped)';
  if (o.stood !== undefined) return `not written again while ${o.stood}`;
  return undefined;
}
