/**
 * The agent wraps its store (MeasuredStore for the metrics, CommitHealth's watch for readiness).
 * Optional members and arguments of Store are not caught by the compiler when a wrapper forgets
 * them: a wrapper that dropped `spaces` or commit's guard once made every cluster agent refuse to
 * start. This holds every wrapper to forwarding every member of Store, with every argument.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CommitHealth } from '../../src/agent/server/commit-health.ts';
import { MeasuredStore } from '../../src/agent/metrics/measured-store.ts';
import { NO_TELEMETRY } from '../../src/agent/metrics/telemetry.ts';
import { ManualClock } from '../../src/core/clock.ts';
import type { AddressSpaces, Membership, Store, StoreCluster } from '../../src/store/store.ts';

/** A store whose every method records its name and arguments and answers something plausible. */
function recordingStore(): { store: Store; calls: Array<[string, unknown[]]> } {
  const calls: Array<[string, unknown[]]> = [];
  const record =
    <T>(name: string, answer: T) =>
    async (...args: unknown[]): Promise<T> => {
      calls.push([name, args]);
      return answer;
    };
  const membership = { announce: record('announce', undefined) } as unknown as Membership;
  const spaces = {
    read: record('spaces.read', {}),
    admit: record('spaces.admit', undefined),
  } as unknown as AddressSpaces;
  const store: Store = {
    description: 'recording',
    readLedger: record('readLedger', { kind: 'unchanged', revision: 1 }),
    commit: record('commit', { kind: 'committed', revision: 2 }),
    findByOwner: record('findByOwner', []),
    list: record('list', []),
    ledgers: record('ledgers', []),
    cluster: { membership, spaces } as StoreCluster,
    ping: record('ping', undefined),
    close: record('close', undefined),
  } as Store;
  return { store, calls };
}

const WRAPPERS: Array<[string, (inner: Store) => Store]> = [
  ['MeasuredStore', (inner) => new MeasuredStore(inner, NO_TELEMETRY)],
  ["CommitHealth's watch", (inner) => new CommitHealth(new ManualClock(0)).watch(inner)],
];

describe('the store wrappers', () => {
  for (const [name, wrap] of WRAPPERS) {
    it(`${name} passes on every member of Store, with every argument (commit's guard too)`, async () => {
      const { store: inner, calls } = recordingStore();
      const outer = wrap(inner);
      assert.equal(outer.description, inner.description);
      assert.equal(outer.cluster?.membership, inner.cluster?.membership, 'membership');
      assert.ok(outer.cluster?.spaces !== undefined, 'spaces');
      const guard = { key: 'spaces/v4/r', revision: 3 };
      await outer.readLedger('p', 7);
      await outer.commit('p', 1, [], guard as never);
      await outer.findByOwner({ network: 'n', containerID: 'c', ifname: 'eth0' });
      await outer.list({ network: 'n' });
      await outer.ledgers('pre');
      await outer.cluster?.spaces.read('v4');
      await outer.cluster?.spaces.admit({} as never, 'r', ['s']);
      await outer.ping();
      await outer.close();
      assert.deepEqual(calls, [
        ['readLedger', ['p', 7]],
        ['commit', ['p', 1, [], guard]],
        ['findByOwner', [{ network: 'n', containerID: 'c', ifname: 'eth0' }]],
        ['list', [{ network: 'n' }]],
        ['ledgers', ['pre']],
        ['spaces.read', ['v4']],
        ['spaces.admit', [{}, 'r', ['s']]],
        ['ping', []],
        ['close', []],
      ]);
    });

    it(`${name} leaves out what the store it wraps does not have`, () => {
      const { store } = recordingStore();
      const { cluster: _c, ...single } = store;
      const outer = wrap(single as Store);
      assert.equal(outer.cluster?.membership, undefined);
      assert.equal(outer.cluster?.spaces, undefined);
    });

    it(`${name} passes on commitAll, so a block a borrower takes over is never left half taken`, async () => {
      const { store, calls } = recordingStore();
      const commits = [{ ledger: 'p', expected: 1, ops: [] }];
      const commitAll = async (c: unknown) => {
        calls.push(['commitAll', [c]]);
        return { kind: 'committed' as const, revision: 2 };
      };
      await wrap({ ...store, commitAll } as Store).commitAll?.(commits);
      assert.deepEqual(calls, [['commitAll', [commits]]]);
      assert.equal(wrap(store).commitAll, undefined, 'none where the store has none');
    });

    it(`${name} passes on etcd's history, so doctor still sees an etcd that never compacts`, () => {
      const { store } = recordingStore();
      const history = { read: async () => ({}) as never };
      const cluster = { ...store.cluster, history } as StoreCluster;
      assert.equal(wrap({ ...store, cluster } as Store).cluster?.history, history);
      assert.equal(wrap(store).cluster?.history, undefined, 'none where the store keeps none');
    });
  }
});
