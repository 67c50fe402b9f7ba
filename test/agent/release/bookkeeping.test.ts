/**
 * Bookkeeping records (ipam/bookkeeping.ts) on the release side: a record Warren keeps for itself
 * (a lent address's placeholder, a held address) holds its address for no container, so no
 * source that judges containers, pods or namespaces releases it, whatever it names. Before the one
 * predicate, lending placeholders escaped only by carrying the borrower's node name; a record of
 * this node's name (a held address) was released by each of these. Over SQLite in memory and a
 * manual clock, through the agent's own release parts (harness.ts).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { gcCandidates } from '../../../src/allocator/gc.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { momentOf, shifted } from '../../../src/core/moment.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { isBookkeeping } from '../../../src/ipam/bookkeeping.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { releaseHarness, watchedNetns } from './harness.ts';

const ranges = parseIpamConfig({ type: 'warren', range: '10.9.0.0/24' }).ranges;
const POOL = ranges[0]?.pool ?? '';
const owner = (containerID: string) => ({ network: 'net', containerID, ifname: 'eth0' });

/**
 * A held address recorded with this node's name, a pod and a namespace that is gone: everything a
 * container's allocation would be released for. And a lender's placeholder as lending writes it.
 */
function records(node: string, netns: string, at: number): Allocation[] {
  const base = { pool: POOL, createdAt: at, node };
  return [
    {
      ...base,
      address: '10.9.0.200',
      network: 'warren.dev/held',
      containerID: 'web-0',
      ifname: '10.9.0.200',
      netns,
      podNamespace: 'default',
      podName: 'web-0',
      podUID: 'uid-web-0',
    },
    { ...base, address: '10.9.0.201', network: 'warren.dev/lent', containerID: 'n2', ifname: '10.9.0.201', node: 'n2' },
  ];
}

async function setUp(options: { onlyNode?: string } = {}) {
  const clock = new ManualClock(1_000_000);
  const store = new SqliteStore({ path: ':memory:' });
  const ns = watchedNetns('warren-bk-');
  const harness = await releaseHarness(clock, store, {
    node: 'n1',
    observer: ns.observer,
    releaseGoneNetns: true,
    ...options,
  });
  // The range's pool is made by an ordinary ADD; the records go in beside it as lending commits them.
  await harness.allocator.allocate({ owner: owner('live'), ranges, netns: join(ns.seen, 'gone-too') });
  const read = await store.readLedger(POOL);
  const kept = records('n1', join(ns.seen, 'gone'), clock.now());
  await store.commit(
    POOL,
    read.revision,
    kept.map((allocation) => ({ op: 'allocate', allocation })),
  );
  // Past the resync grace, short of the reconcile interval: a test runs the passes it means to.
  clock.advance(30_000);
  const bookkept = async () => (await store.list()).filter(isBookkeeping).map((a) => a.address);
  const close = async () => {
    await harness.done();
    await store.close();
  };
  return { clock, store, ns, harness, kept, bookkept, close };
}

describe('bookkeeping records on the release side', () => {
  it('never lets a containerd resync release a bookkeeping record, even one recorded with this node name', async () => {
    const { harness, bookkept, close } = await setUp();
    await harness.pipeline.resync(new Set());
    await harness.pipeline.idle();
    assert.deepEqual(await bookkept(), ['10.9.0.200', '10.9.0.201']);
    assert.equal(harness.pipeline.containerStatus().released, 1, 'the gone container went');
    await close();
  });

  it("never lets a runtime adapter's resync release a bookkeeping record under its namespace prefixes", async () => {
    const { harness, ns, bookkept, close } = await setUp();
    await harness.pipeline.resync(new Set(), { adapter: 'podman', netnsPrefixes: [`${ns.seen}/`] });
    await harness.pipeline.idle();
    assert.deepEqual(await bookkept(), ['10.9.0.200', '10.9.0.201']);
    assert.equal(harness.pipeline.containerStatus('podman').released, 1, "the adapter's gone container went");
    await close();
  });

  it('never lists a bookkeeping record in the audit (stale, suspect or unobservable), and neither the sweep nor --fix releases one', async () => {
    const { harness, bookkept, close } = await setUp();
    const report = await harness.reconciler.audit(false);
    assert.deepEqual(
      report.findings.map((f) => f.allocation.containerID),
      ['live'],
      'only the container is judged',
    );
    assert.deepEqual(report.counts, { healthy: 0, stale: 1, suspect: 0 });
    const fixed = await harness.reconciler.audit(true);
    assert.deepEqual(
      (fixed.released ?? []).map((a) => a.containerID),
      ['live'],
    );
    await harness.reconciler.tick();
    assert.deepEqual(await bookkept(), ['10.9.0.200', '10.9.0.201']);
    await close();
  });

  it('audits only the containers on a store shared by nodes too (the borrower-named placeholder is not needed to hide it)', async () => {
    const { harness, close } = await setUp({ onlyNode: 'n1' });
    const report = await harness.reconciler.audit(false);
    assert.deepEqual(
      report.findings.map((f) => f.allocation.containerID),
      ['live'],
    );
    await close();
  });

  it('never releases a bookkeeping record for a pod gone, a container deleted, or a container named like it', async () => {
    const { clock, harness, bookkept, close } = await setUp();
    const now = momentOf(clock);
    await harness.pipeline.attempt({
      kind: 'pod-gone',
      pod: { uid: 'uid-web-0', namespace: 'default', name: 'web-0' },
      because: 'deleted',
      goneAt: shifted(now, -120_000),
      releaseAfter: shifted(now, -60_000),
    });
    await harness.pipeline.attempt({ kind: 'container-deleted', containerID: 'web-0', observedAt: now });
    await harness.pipeline.attempt({ kind: 'container-deleted', containerID: 'n2', observedAt: now });
    assert.deepEqual(await bookkept(), ['10.9.0.200', '10.9.0.201']);
    await close();
  });
});

describe('bookkeeping records and CNI GC', () => {
  it("never takes a bookkeeping record, though no runtime's valid attachments name it", () => {
    const held = records('n1', '/var/run/netns/cni-x', 0).map((a) => ({ ...a, network: 'net' }));
    const container: Allocation = { ...(held[0] as Allocation), network: 'net', address: '10.9.0.5', containerID: 'c' };
    const mixed = [container, ...records('n1', '/var/run/netns/cni-x', 0)];
    const taken = gcCandidates(mixed, new Set(), {}, undefined);
    assert.deepEqual(
      taken.map((o) => o.containerID),
      ['c'],
    );
    // The same records under a CNI network name are containers, and are taken.
    assert.equal(gcCandidates(held, new Set(), {}, undefined).length, 2);
  });
});
