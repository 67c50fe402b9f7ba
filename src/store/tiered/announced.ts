/**
 * The addresses a node's publication announced it hands out next (`ahead`: tiered/publication-need.ts),
 * when its agent starts again (tiered/file-check.ts). An ADD that took one needed no write, so the
 * cluster cannot name its container: what it can say is that the address may be in use.
 *
 * Guarantees:
 * - a file older than the publication (restored from a copy, or lost) records each announced
 *   address as a placeholder (a bookkeeping record, network `warren.dev/announced`: no runtime,
 *   journal, pod source or GC releases it), in place of whatever the file held there: the address
 *   was free when the publication was written, so a record of the file's is stale. They stay until
 *   an operator accepts the store as it is (`warren store accept` releases them, and their blocks
 *   are published again). Before publications announced addresses, an ADD between two
 *   publications was lost with such a file; now only one outside what was announced is (until the
 *   next run, as before);
 * - a file as new as the publication cannot tell a copy (a snapshot of a running node, taken after
 *   the publication) from itself after a restart or a kill, which is far more common: placeholders
 *   there would hold addresses after every crash until an operator came. Its cursor is moved to
 *   the last address announced instead, so the picker reaches them last: after every address of
 *   the block free beyond them, not first. What is left of the window on such a copy is that: ADDs
 *   that took announced addresses after the copy and before the node's next write (at most the
 *   settle interval), handed out again only once the rest of the block's free addresses are.
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

/** Moves the cursor of a file as new as `block`'s publication past what it announced (see the header). */
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
