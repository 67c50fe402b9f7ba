/**
 * The addresses a node's publication announced it hands out next (`ahead`: tiered/publication-need.ts),
 * when its file went back (tiered/file-check.ts). An ADD that took one needed no write, so the
 * cluster cannot name its container: what it can say is that the address may be in use.
 *
 * Guarantees:
 * - a file older than the publication (restored from a copy, or lost) records each announced
 *   address as a placeholder (a bookkeeping record, network `warren.dev/announced`: no runtime,
 *   journal, pod source or GC releases it), in place of whatever the file held there: the address
 *   was free when the publication was written, so a record of the file's is stale. They stay until
 *   an operator accepts the store as it is (`warren store accept` releases them all, and the blocks
 *   are published again) or releases them one by one. Before publications announced addresses, an
 *   ADD between two publications was lost with the file; now only one outside what was announced is
 *   (until the next run, as before);
 * - a file at least as new as the publication (a restart, or a copy taken after it was written)
 *   cannot tell which announced addresses were taken after its own revision: while any is free in it,
 *   its cursor is moved to the last one announced, so the picker reaches them last, after one turn
 *   of the block, not first. That turn is what is left of the window on such a copy.
 */
import { WarrenError } from '../../core/errors.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { bookkeepingNetwork } from '../../ipam/bookkeeping.ts';
import type { PublishedBlock } from './cluster-tier.ts';
import type { LedgerOp, LedgerSnapshot, Store } from '../store.ts';

/** The network of an announced address's placeholder. */
export const ANNOUNCED_NETWORK = bookkeepingNetwork('announced');

/** The placeholder of announced address `address` of block `key` (one owner per address: its own). */
function placeholder(key: string, address: string, node: string, createdAt: number): Allocation {
  return { pool: key, address, network: ANNOUNCED_NETWORK, containerID: address, ifname: 'announced', node, createdAt };
}

/**
 * The ops recording `block`'s announced addresses as placeholders in a file older than it: `here`
 * is what the file holds in the block by address, `released` the addresses the merge releases
 * already (added to).
 */
export function announcedOps(
  block: PublishedBlock,
  node: string,
  here: ReadonlyMap<string, Allocation>,
  released: Set<string>,
): LedgerOp[] {
  const ops: LedgerOp[] = [];
  for (const address of block.ahead ?? []) {
    const held = here.get(address);
    if (held !== undefined && !released.has(address)) {
      if (held.network === ANNOUNCED_NETWORK) continue; // a merge that failed later wrote it already
      ops.push({ op: 'release', address });
      released.add(address);
    }
    ops.push({ op: 'allocate', allocation: placeholder(block.key, address, node, block.publishedAt) });
  }
  return ops;
}

/** Moves the cursor of a file at least as new as `block` past what it announced (see the header). */
export async function passAnnounced(local: Store, block: PublishedBlock, read: LedgerSnapshot): Promise<void> {
  const last = block.ahead?.at(-1);
  if (last === undefined || read.cursor === last) return;
  const occupied = new Set([...read.allocations, ...read.resting.map((r) => r.address)]);
  if ((block.ahead ?? []).every((address) => occupied.has(address))) return;
  const result = await local.commit(block.key, read.revision, [{ op: 'cursor', address: last }]);
  if (result.kind === 'conflict')
    throw new WarrenError('TRY_AGAIN', `block ${block.key}'s cursor could not be moved: ${result.reason}`);
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
