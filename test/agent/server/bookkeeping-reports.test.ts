/**
 * Bookkeeping records (ipam/bookkeeping.ts) in what an operator reads: the status counts them apart
 * from containers' allocations, `warren nodes` counts a placeholder as lent by the node whose block
 * holds it (not as an allocation of the borrower it names, and a record naming no node makes no
 * node appear), `warren release --address` refuses to free one, and listings name them for what
 * they are: in the dashboard and as a gauge of their own. Through the agent's API in process
 * (test/api/harness.ts) and the pure report builders.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderDashboardBody } from '../../../src/agent/dashboard/page.ts';
import { AgentMetrics } from '../../../src/agent/metrics/prometheus.ts';
import { bookkeepingCounts } from '../../../src/agent/server/bookkeeping-counts.ts';
import { doctorFacts } from '../../../src/agent/server/doctor-facts.ts';
import { nodeReports } from '../../../src/agent/server/operator-reports.ts';
import { resolveAgentOptions } from '../../../src/agent/settings/options.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { NetnsObserver } from '../../../src/sources/netns.ts';
import { tempDir } from '../../helpers/processes.ts';
import { WarrenError } from '../../../src/core/errors.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { bookkeepingLabel, isBookkeeping } from '../../../src/ipam/bookkeeping.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { harness } from '../../api/harness.ts';
import { dashboardData } from '../dashboard/fixtures.ts';
import { parseExposition, sample } from '../../helpers/prometheus.ts';

const BLOCK = '10.8.0.0/24#10.8.0.0/28';

function record(address: string, network: string, containerID: string, node: string, pool = BLOCK): Allocation {
  return { pool, address, network, containerID, ifname: address, node, createdAt: 0 };
}

describe('bookkeeping records in the node report', () => {
  it("counts a lender's placeholder as lent by the lender, never as the borrower's allocation, and invents no node for a mark", () => {
    const reports = nodeReports(
      [
        { node: 'n1', since: 0 },
        { node: 'n2', since: 0 },
      ],
      [{ ledger: BLOCK, allocated: 3, resting: 0, affinity: 'n1', revision: 1 }],
      [
        record('10.8.0.1', 'net', 'c1', 'n1'),
        record('10.8.0.2', 'warren.dev/lent', 'n2', 'n2'),
        record('10.8.0.3', 'warren.dev/returned', 'n1', 'warren.dev/returned', '10.8.0.0/24#10.8.0.9/32'),
      ],
    );
    assert.deepEqual(
      reports.map((r) => [r.node, r.allocations, r.lent]),
      [
        ['n1', 1, 1],
        ['n2', 0, undefined],
      ],
    );
  });
});

describe('bookkeeping records through the API', () => {
  it('counts them apart in the status, refuses to release one by address, and lists them', async () => {
    const h = await harness();
    try {
      const added = await h.client.cni({
        command: 'ADD',
        containerID: 'c1',
        netns: '/var/run/netns/c1',
        ifname: 'eth0',
        args: '',
        config: { cniVersion: '1.1.0', name: 'bknet', ipam: { type: 'warren', range: '10.8.0.0/24' } },
      });
      assert.equal(added.kind, 'result');
      const pool = (await h.store.list())[0]?.pool ?? '';
      const read = await h.store.readLedger(pool);
      await h.store.commit(pool, read.revision, [
        { op: 'allocate', allocation: record('10.8.0.200', 'warren.dev/lent', 'n2', 'n2', pool) },
        { op: 'allocate', allocation: record('10.8.0.201', 'warren.dev/lent', 'n3', 'n3', pool) },
      ]);
      const status = await h.client.status();
      assert.equal(status.allocations, 1, 'one container holds an address');
      assert.deepEqual(status.bookkeeping, { lent: 2 });

      const refused = await h.client.release({ address: '10.8.0.200' }).then(
        () => undefined,
        (error: unknown) => error,
      );
      assert.ok(refused instanceof WarrenError, 'the release is refused');
      assert.equal(refused.code, 'BAD_REQUEST');
      assert.match(refused.message, /10\.8\.0\.200 .* is lent to n2/);
      // Nor does a release of the borrower's name as a container take its placeholders.
      assert.deepEqual((await h.client.release({ containerID: 'n2' })).released, []);
      const listed = await h.store.list();
      assert.deepEqual(listed.filter(isBookkeeping).map(bookkeepingLabel), ['lent to n2', 'lent to n3']);
    } finally {
      await h.close();
    }
  });
});

describe('bookkeepingLabel', () => {
  it('says what each record is, and nothing for a container', () => {
    assert.equal(bookkeepingLabel({ network: 'warren.dev/lent', containerID: 'n2' }), 'lent to n2');
    assert.equal(bookkeepingLabel({ network: 'warren.dev/returned', containerID: 'n1' }), 'loan given back by n1');
    assert.equal(bookkeepingLabel({ network: 'warren.dev/held', containerID: 'web-0' }), 'held: web-0');
    assert.equal(bookkeepingLabel({ network: 'net', containerID: 'c1' }), undefined);
  });
});

describe('bookkeeping records in the dashboard and the metrics', () => {
  it('shows lent addresses beside the allocations, on the node and in its row', () => {
    const page = renderDashboardBody(
      dashboardData(
        { nodes: [{ node: 'n1', alive: true, blocks: [BLOCK], allocations: 4, lent: 2 }] },
        { allocations: 4, bookkeeping: { lent: 2 } },
      ),
    );
    assert.match(page, /data-testid="allocations-total">4</);
    assert.match(page, /data-testid="lent-total">2 lent to other nodes</);
    assert.match(page, /data-testid="node-lent">\+2 lent</);
    assert.doesNotMatch(renderDashboardBody(dashboardData()), /lent-total/);
  });

  it('exports them by kind as warren_bookkeeping_addresses, read from the store when scraped', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const pool = '10.8.0.0/24';
    await store.commit(pool, (await store.readLedger(pool)).revision, [
      { op: 'allocate', allocation: record('10.8.0.1', 'net', 'c1', 'n1', pool) },
      { op: 'allocate', allocation: record('10.8.0.2', 'warren.dev/lent', 'n2', 'n2', pool) },
      { op: 'allocate', allocation: record('10.8.0.3', 'warren.dev/returned', 'n1', 'warren.dev/returned', pool) },
    ]);
    const metrics = new AgentMetrics({
      version: '0.0.0',
      processMetrics: false,
      readings: {
        pools: async () => [],
        journal: () => ({ pending: 0, setAside: 0 }),
        queueDepth: () => ({}),
        ready: async () => true,
        bookkeeping: () => bookkeepingCounts(store),
      },
    });
    try {
      const families = parseExposition(await metrics.exposition());
      assert.equal(sample(families, 'warren_bookkeeping_addresses', { kind: 'lent' }), 1);
      assert.equal(sample(families, 'warren_bookkeeping_addresses', { kind: 'returned' }), 1);
    } finally {
      await store.close();
    }
  });
});

describe('bookkeeping records in the doctor', () => {
  it('never counts one as an allocation whose namespace was not recorded', async () => {
    const options = resolveAgentOptions(
      { stateDir: tempDir('warren-bk-doctor-'), netnsDirs: '/var/run/netns', nodeName: 'n1', metricsAddress: '' },
      {},
      0,
      '/',
    );
    const store = new SqliteStore({ path: ':memory:' });
    try {
      const pool = '10.8.0.0/24';
      await store.commit(pool, (await store.readLedger(pool)).revision, [
        { op: 'allocate', allocation: { ...record('10.8.0.1', 'net', 'c1', 'n1', pool), netns: '/var/run/netns/c1' } },
        { op: 'allocate', allocation: record('10.8.0.2', 'warren.dev/held', 'web-0', 'n1', pool) },
      ]);
      const facts = await doctorFacts({
        options,
        store,
        observer: new NetnsObserver(options.netnsDirs),
        clock: systemClock,
        version: '0.0.0',
      });
      assert.deepEqual(facts.recordedNetns, [{ dir: '/var/run/netns', allocations: 1, example: '/var/run/netns/c1' }]);
    } finally {
      await store.close();
    }
  });
});
