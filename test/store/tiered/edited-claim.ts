/**
 * One scenario on any cluster tier, as the soak found it on kubernetes (seed 3839 step 18423): node
 * n1's claim is edited by hand to name node n2, which never made it and gives it back; n1's
 * publication is then deleted by hand. n2, next asked for an address in the range, must not claim
 * n1's block: the claim went back to n1 (tiered/stray-claims.ts), which holds it again, publishes it
 * again and hands out in it again. Each store's test supplies its hand edits (`kubectl edit`,
 * `etcdctl put`) and the two stores.
 */
import assert from 'node:assert/strict';
import { Allocator } from '../../../src/allocator/allocator.ts';
import type { Clock } from '../../../src/core/clock.ts';
import type { TieredStore } from '../../../src/store/tiered/store.ts';
import { owner, rangesOf } from './nodes.ts';

export interface EditedClaimParts {
  readonly clock: Clock;
  /** The owner and the node the claim is edited to name, with their node names. */
  readonly n1: { readonly store: TieredStore; readonly node: string };
  readonly n2: { readonly store: TieredStore; readonly node: string };
  /** What n2's store told its operator. */
  readonly notices: readonly string[];
  /** Two /28 blocks (a /27) for the scenario, and one more /28 range n2 serves from first. */
  readonly range: string;
  readonly otherRange: string;
  editClaim(key: string, to: string): Promise<void>;
  deletePublication(key: string): Promise<void>;
  published(key: string): Promise<boolean>;
}

export async function claimEditedThenPublicationDeleted(p: EditedClaimParts): Promise<void> {
  const { clock, n1, n2 } = p;
  const r = rangesOf({ range: p.range, block_size: 28, network_name: `edited-${n1.node}` });
  const a1 = new Allocator({ store: n1.store, clock, node: n1.node, blocks: true });
  const [held] = await a1.allocate({ owner: owner('edit-a'), ranges: r });
  const key = held?.allocation.pool ?? '';
  await n1.store.flush(); // its publication lists edit-a
  const a2 = new Allocator({ store: n2.store, clock, node: n2.node, blocks: true });
  const other = rangesOf({ range: p.otherRange, block_size: 28, network_name: `edited-other-${n1.node}` });
  await a2.allocate({ owner: owner('edit-first'), ranges: other }); // n2 serving, its file compared
  await p.editClaim(key, n2.node);
  await n1.store.check(); // n1 sees its claim taken: its range halts
  await n2.store.check(); // n2 never made the claim: it gives it back
  assert.ok(
    p.notices.some((m) => m.includes(`block ${key}`) && m.includes('never recorded claiming it')),
    p.notices.join('\n'),
  );
  await p.deletePublication(key);
  const [theirs] = await a2.allocate({ owner: owner('edit-x'), ranges: r });
  assert.notEqual(
    theirs?.allocation.pool,
    key,
    `${theirs?.allocation.address} is not in n1's block (n1 holds ${held?.allocation.address})`,
  );
  assert.equal((await n1.store.tier.claimOf(key))?.node, n1.node, 'the claim given back to its owner');
  await n1.store.check(); // the owner finds it standing for it again, and publishes it again
  await n1.store.flush();
  assert.ok(await p.published(key), 'published again by its owner');
  const [next] = await a1.allocate({ owner: owner('edit-b'), ranges: r });
  assert.equal(next?.allocation.pool, key, 'the owner hands out in it again: its halt ended');
}
