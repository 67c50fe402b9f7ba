/**
 * The network namespaces of addresses no CNI ADD recorded here (src/agent/release/sandbox-netns.ts),
 * in the agent's release side composed as the agent composes it (harness.ts), on a ManualClock: a
 * migrated address (its pod, its sandbox's container ID, no namespace) gets the namespace of the
 * sandbox it was made for from the runtime, so the reconcile pass after that namespace is gone
 * releases it (before, nothing judged it by its namespace: it waited for containerd's word or the
 * pod-gone grace); never another sandbox's, and a runtime that fails is said, never thrown.
 */
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { SandboxLookup } from '../../../src/agent/release/sandbox-netns.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { releaseHarness, watchedNetns } from './harness.ts';

const ranges = parseIpamConfig({ type: 'warren', range: '10.31.0.0/24' }).ranges;
const POOL = ranges[0]?.pool ?? '';

/** An address as `warren migrate whereabouts` left it adopted: its pod and sandbox, no namespace. */
function migrated(address: string, containerID: string, podUID: string, at: number): Allocation {
  return {
    pool: POOL,
    address,
    network: 'macvlan-conf',
    containerID,
    ifname: 'net1',
    node: 'n1',
    createdAt: at,
    podNamespace: 'default',
    podName: `pod-${podUID}`,
    podUID,
  };
}

async function setUp(lookup: SandboxLookup) {
  const clock = new ManualClock(1_000_000);
  const store = new SqliteStore({ path: ':memory:' });
  const ns = watchedNetns('warren-sbx-');
  const harness = await releaseHarness(clock, store, {
    node: 'n1',
    observer: ns.observer,
    releaseGoneNetns: true,
    sandboxes: lookup,
  });
  // The range's pool made by an ordinary ADD; the migrated records beside it.
  await harness.allocator.allocate({
    owner: { network: 'other', containerID: 'live', ifname: 'eth0' },
    ranges,
    netns: join(ns.seen, 'live'),
  });
  writeFileSync(join(ns.seen, 'live'), '');
  clock.advance(30_000);
  return { clock, store, ns, harness };
}

const held = async (store: SqliteStore, address: string) => (await store.list({ address }))[0];

describe('network namespaces of migrated addresses, from the runtime', () => {
  it('records the namespace of the sandbox the address was made for; the pass after it is gone releases it', async () => {
    let sandboxNs = '';
    const t = await setUp(async () => [
      { id: 'sandbox-old', podUID: 'uid-a', netns: '/var/run/netns/cni-old' }, // the pod's sandbox made before
      { id: 'sandbox-a', podUID: 'uid-a', netns: sandboxNs },
      { id: 'sandbox-b', podUID: 'uid-other', netns: '/var/run/netns/cni-other' }, // the ID, but another pod's
    ]);
    try {
      sandboxNs = join(t.ns.seen, 'cni-a');
      writeFileSync(sandboxNs, '');
      const read = await t.store.readLedger(POOL);
      const commit = await t.store.commit(POOL, read.revision, [
        { op: 'allocate', allocation: migrated('10.31.0.50', 'sandbox-a', 'uid-a', t.clock.now()) },
        { op: 'allocate', allocation: migrated('10.31.0.51', 'sandbox-b', 'uid-b', t.clock.now()) },
      ]);
      assert.equal(commit.kind, 'committed');

      await t.harness.reconciler.tick();
      assert.equal((await held(t.store, '10.31.0.50'))?.netns, sandboxNs, 'its own sandbox, not the older one');
      assert.equal((await held(t.store, '10.31.0.51'))?.netns, undefined, 'no sandbox of its pod: left as it is');

      // The pod's sandbox goes: the next pass releases the address by its namespace, as any other.
      rmSync(sandboxNs);
      await t.harness.reconciler.tick();
      assert.equal(await held(t.store, '10.31.0.50'), undefined, 'released once its namespace is gone');
      assert.ok(await held(t.store, '10.31.0.51'), 'nothing judges the one with no namespace by one');
      assert.ok(await held(t.store, (await t.store.list({ containerID: 'live' }))[0]?.address ?? ''));
    } finally {
      await t.harness.done();
    }
  });

  it('lists the store once a pass: the sweep audits the listing the namespaces were recorded on', async () => {
    let goneNs = '';
    const t = await setUp(async () => [{ id: 'sandbox-d', podUID: 'uid-d', netns: goneNs }]);
    try {
      goneNs = join(t.ns.seen, 'cni-gone'); // in the watched directory, never made: provably gone
      const read = await t.store.readLedger(POOL);
      await t.store.commit(POOL, read.revision, [
        { op: 'allocate', allocation: migrated('10.31.0.70', 'sandbox-d', 'uid-d', t.clock.now()) },
      ]);
      const list = t.store.list.bind(t.store);
      let listings = 0;
      t.store.list = (filter) => {
        listings += 1;
        return list(filter);
      };
      await t.harness.reconciler.tick();
      t.store.list = list;
      assert.equal(listings, 1, 'one listing for the namespaces and the sweep');
      // The namespace recorded is gone already: the sweep judged the listing with it recorded.
      assert.equal(await held(t.store, '10.31.0.70'), undefined, 'released in the pass that recorded it');
    } finally {
      await t.harness.done();
    }
  });

  it('says a runtime that fails in the errors and goes on', async () => {
    const t = await setUp(async () => {
      throw new Error('containerd: connection refused');
    });
    try {
      const read = await t.store.readLedger(POOL);
      await t.store.commit(POOL, read.revision, [
        { op: 'allocate', allocation: migrated('10.31.0.60', 'sandbox-c', 'uid-c', t.clock.now()) },
      ]);
      const report = await t.harness.reconciler.tick();
      assert.ok(report, 'the pass ran to its end');
      assert.equal((await held(t.store, '10.31.0.60'))?.netns, undefined);
      assert.match(
        JSON.stringify(t.harness.reconciler.status()),
        /pod sandboxes failed: containerd: connection refused/,
      );
    } finally {
      await t.harness.done();
    }
  });
});
