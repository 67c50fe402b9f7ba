/**
 * The pools report (agent/server/operator-reports.ts) over a real SQLite store: a holding's use
 * pool, where a node records a pod's use of a held address, is a row while a pod uses the address
 * and none once the use ended (issue 34, item 17: `warren pools` kept listing it for good).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { poolReports } from '../../../src/agent/server/operator-reports.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import { useKey } from '../../../src/ipam/holding-key.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';

describe('poolReports', () => {
  it("keeps no row for a holding's use ledger once its use ended", async (t) => {
    const store = new SqliteStore({ path: ':memory:' });
    t.after(() => store.close());
    const [range] = parseIpamConfig({ type: 'warren', range: '10.34.17.0/24' }).ranges;
    assert.ok(range !== undefined);
    const use = useKey(range.pool, '10.34.17.9', 'statefulset/db/web/0');
    const allocation = {
      pool: use,
      address: '10.34.17.9',
      network: 'sticky',
      containerID: 'web-0-sandbox',
      ifname: 'eth0',
      node: 'n1',
      createdAt: 0,
    };
    const used = await store.commit(use, 0, [{ op: 'allocate', allocation }]);
    assert.equal(used.kind, 'committed');
    const listed = poolReports(await store.ledgers()).filter((p) => p.pool === use);
    assert.deepEqual(
      listed.map((p) => p.allocated),
      [1],
      'listed while a pod uses the address',
    );
    const revision = (await store.ledgers(use)).find((p) => p.ledger === use)?.revision ?? 0;
    const ended = await store.commit(use, revision, [{ op: 'release', address: '10.34.17.9' }]);
    assert.equal(ended.kind, 'committed');
    assert.deepEqual(
      poolReports(await store.ledgers()).filter((p) => p.pool === use),
      [],
      'no row once the use ended',
    );
  });
});
