/**
 * The contract of ClusterTier.watchRequests (src/store/cluster.ts, required of every tier), a case
 * of the tier conformance suite (tier-conformance.ts) kept apart by size: a tier tells every
 * listener of each ask and grant as written (its grants and version).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { AddressRequest, ClusterTier, RangeRecord } from '../../../src/store/tiered/cluster-tier.ts';
import { waitFor } from '../../helpers/processes.ts';

export interface ContractParts {
  readonly tier: () => Promise<ClusterTier>;
  readonly range: () => RangeRecord;
  readonly node: () => string;
  readonly blockOf: (r: RangeRecord, i: number) => string;
}

export function requestWatchContract({ tier, range, node, blockOf }: ContractParts): void {
  it('tells every tier listening of requests asked and granted, as they are written', async () => {
    const [a, b] = [await tier(), await tier()];
    const r = range();
    const [asker, lender] = [node(), node()];
    const told: AddressRequest[] = [];
    const view = b.watchRequests({ node: asker }, ({ request: q }) => {
      if (q.pool === r.pool) told.push(q);
    });
    try {
      const asked = await a.ask(r.pool, asker, 3);
      await waitFor('the ask told', () => told.find((q) => q.node === asker && q.wanted === 3));
      const grants = [{ address: '10.0.0.7', lender, block: blockOf(r, 0) }];
      const granted = await a.updateRequest(asked, grants, 1);
      assert.ok(granted);
      const seen = await waitFor('the grant told', () => told.find((q) => q.wanted === 1));
      assert.deepEqual(seen, granted, 'told as written: its grants and its version');
    } finally {
      view.close();
    }
  });

  it('keeps the requests of a scope in a view: an open request leaves the open view when granted in full', async () => {
    const [a, b] = [await tier(), await tier()];
    const r = range();
    const [asker, lender] = [node(), node()];
    const changes: Array<{ node: string; wanted: number; gone: boolean }> = [];
    const view = b.watchRequests({ open: [r.pool] }, ({ request, gone }) =>
      changes.push({ node: request.node, wanted: request.wanted, gone }),
    );
    try {
      await waitFor('the view synced', () => (view.synced ? true : undefined));
      const asked = await a.ask(r.pool, asker, 1);
      await waitFor('the ask in the view', () => view.values().find((q) => q.node === asker));
      const granted = await a.updateRequest(asked, [{ address: '10.0.0.9', lender, block: blockOf(r, 0) }], 0);
      assert.ok(granted);
      await waitFor('the request gone from the view', () => (view.values().length === 0 ? true : undefined));
      assert.deepEqual(changes, [
        { node: asker, wanted: 1, gone: false },
        { node: asker, wanted: 1, gone: true },
      ]);
    } finally {
      view.close();
    }
  });
}
