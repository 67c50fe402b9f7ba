/**
 * The addresses a node's publication announced it hands out next (`ahead`: tiered/publication-need.ts),
 * when its agent starts again (tiered/file-check.ts). An ADD that took one needed no write, so the
 * cluster cannot name its container: what it can say is that the address may be in use.
 *
 * Guarantees:
 * - each announced address the file does not hold as an allocation is recorded as a placeholder (a
 *   bookkeeping record, network `warren.dev/announced`: no runtime, journal, pod source or GC
 *   releases it). In a file older than the publication (restored from a copy, or lost) it replaces
 *   whatever the file held there: the address was free when the publication was written, so a
 *   record of the file's is stale. In a file as new (an agent killed before it published, a copy
 *   taken after the publication: a VM snapshot), the file's records stay: the file cannot tell an
 *   announced address free in it from one taken after its copy was taken;
 * - they stay until an operator accepts the store as it is (`warren store accept` releases them
 *   all, and their blocks are published again) or releases them one by one: before publications
 *   announced addresses, an ADD between two publications was lost with the file; now only one
 *   outside what was announced is (until the next run, as before);
 * - an agent that stops cleanly publishes its blocks announcing nothing (tiered/publisher.ts), so a
 *   restart keeps no placeholder: only a kill, a crash or a copy costs them.
 */
import { WarrenError } from '../../core/errors.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { bookkeepingNetwork } from '../../ipam/bookkeeping.ts';
import type { PublishedBlock } from './cluster-tier.ts';
import type { LedgerOp, Store } from '../store.ts';

/** The network of an announced address's placeholder. */
export const ANNOUNCED_NETWORK = bookkeepingNetwork('announced');

/** The placeholder of announced address `address` of block `key` (one owner per address: its own). */
function placeholder(key: string, address: string, node: string, createdAt: number): Allocation {
  return { pool: key, address, network: ANNOUNCED_NETWORK, containerID: address, ifname: 'announced', node, createdAt };
}

/**
 * The ops recording `block`'s announced addresses as placeholders in the file: `here` is what the
 * file holds in the block by address; with `stale` (the publication is newer), a record of the
 * file's at an announced address is released first (`released`: what the merge releases already,
 * added to); without, it is kept.
 */
export function announcedOps(
  block: PublishedBlock,
  node: string,
  here: ReadonlyMap<string, Allocation>,
  o: { readonly stale: boolean; readonly released: Set<string> },
): LedgerOp[] {
  const ops: LedgerOp[] = [];
  for (const address of block.ahead ?? []) {
    const held = here.get(address);
    if (held !== undefined && !o.released.has(address)) {
      if (held.network === ANNOUNCED_NETWORK || !o.stale) continue; // written before, or the file's own
      ops.push({ op: 'release', address });
      o.released.add(address);
    }
    ops.push({ op: 'allocate', allocation: placeholder(block.key, address, node, block.publishedAt) });
  }
  return ops;
}

/** Releases every announced address's placeholder (an operator accepted), marking each block for publishing. */
export async function releaseAnnounced(local: Store, mark: (key: string) => void): Promise<void> {
  for (const a of await local.list({ network: ANNOUNCED_NETWORK })) {
    const read = await local.readLedger(a.pool);
    const result = await local.commit(a.pool, read.revision, [{ op: 'release', address: a.address }]);
    if (result.kind === 'conflict')
      throw new WarrenError('TRY_AGAIN', `${a.address} in ${a.pool} could not be released: ${result.reason}`);
    mark(a.pool);
  }
}
