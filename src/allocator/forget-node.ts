/**
 * Forgetting a node that is gone for good: its allocations are released and its blocks lose their
 * affinity, so other nodes can claim them; addresses other nodes borrowed in those blocks stay
 * allocated. The caller makes sure the node is not alive (its announcement has lapsed) and that one
 * agent of the cluster does this, not every one.
 *
 * Idempotent: forgetting a node that holds nothing returns empty lists.
 *
 * The node's blocks are freed in the cluster (Store.cluster, the two-tier store: each claim
 * removed only as it was read, so one agent frees each block) and the addresses it lent are
 * dropped; its allocations lived in its own store, and only what this store lists of it is released
 * here. A store without block owners has no blocks to free.
 */
import type { Allocation } from '../ipam/allocation.ts';
import type { Store } from '../store/store.ts';
import type { LedgerCache } from './ledger-cache.ts';

export interface ForgottenNode {
  readonly released: Allocation[];
  /** Keys of the blocks that lost the node's affinity. */
  readonly blocks: string[];
}

export interface ForgetNodeParts {
  readonly store: Store;
  readonly ledgers: LedgerCache;
  /** Releases given addresses of one ledger (the allocator's one release path). */
  readonly releaseAddresses: (pool: string, addresses: readonly string[]) => Promise<Allocation[]>;
}

export async function forgetNode(parts: ForgetNodeParts, node: string): Promise<ForgottenNode> {
  const { store, ledgers } = parts;
  const byPool = new Map<string, string[]>();
  for (const a of await store.list({ node })) byPool.set(a.pool, [...(byPool.get(a.pool) ?? []), a.address]);
  const released: Allocation[] = [];
  for (const [pool, addresses] of byPool) released.push(...(await parts.releaseAddresses(pool, addresses)));
  const freed = (await store.cluster?.owners.forgetNode(node)) ?? [];
  for (const key of freed) ledgers.forget(key);
  return { released, blocks: freed };
}
