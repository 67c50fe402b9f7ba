/**
 * The release pipeline in process, over SQLite in memory and a manual clock: intents from every
 * source go through one ordered retry queue and one rule. Resync grace, exited containers waiting
 * for their namespace (and released when a netns directory loses the entry), per-key backoff with
 * acks only after the commit, the ADD-time settle, look-again intents not queued twice, resync
 * acknowledgements, and the reconcile pass's sweep and audit --fix going through the pipeline.
 */
import assert from 'node:assert/strict';
import { mkdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Allocator } from '../../../src/allocator/allocator.ts';
import type { ReleaseIntent } from '../../../src/agent/release/intent.ts';
import {
  consumeContainerd,
  consumeNetnsRemovals,
  consumeRuntimeAdapter,
  containerIntent,
} from '../../../src/agent/release/consumers.ts';
import type { RuntimeItem } from '../../../src/sources/plugins/event-source-client.ts';
import { AsyncChannel } from '../../../src/core/async-channel.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { momentOf } from '../../../src/core/moment.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import { recordMissedDelete } from '../../../src/plugin/journal-writer.ts';
import type { ContainerdItem } from '../../../src/sources/containerd/event-source.ts';
import { NetnsObserver } from '../../../src/sources/netns.ts';
import type { NetnsRemoval } from '../../../src/sources/netns-removals.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import type { AllocationFilter, CommitResult, LedgerOp } from '../../../src/store/store.ts';
import { tempDir, waitFor } from '../../helpers/processes.ts';
import { releaseHarness } from './harness.ts';
import { NetnsScopes } from '../../../src/agent/release/netns-scopes.ts';

/** A store whose commits, or listings of one container, fail while told to. */
class FlakyStore extends SqliteStore {
  failCommits = false;
  failListing: string | undefined;
  override async commit(pool: string, expected: number, ops: readonly LedgerOp[]): Promise<CommitResult> {
    if (this.failCommits) throw new Error('disk I/O error (injected)');
    return super.commit(pool, expected, ops);
  }
  override async list(filter?: AllocationFilter): Promise<Allocation[]> {
    if (
      this.failListing !== undefined &&
      (filter?.containerID === this.failListing || filter?.containerID === undefined)
    )
      throw new Error('store away (injected)');
    return super.list(filter);
  }
}

const ranges = parseIpamConfig({ type: 'warren', range: '10.9.0.0/24' }).ranges;
const owner = (containerID: string, ifname = 'eth0') => ({ network: 'net', containerID, ifname });
const held = async (store: SqliteStore) => (await store.list()).map((a) => a.containerID).sort();

/** A netns directory the observer can see (a mount point in a fake mountinfo), and one it cannot. */
function namespaces() {
  const root = realpathSync(tempDir('warren-ns-'));
  const seen = join(root, 'netns');
  const unseen = join(root, 'unmounted');
  mkdirSync(seen);
  mkdirSync(unseen);
  const mountinfo = join(root, 'mountinfo');
  writeFileSync(mountinfo, `22 1 8:1 / / rw - ext4 /dev/sda1 rw\n100 22 0:50 / ${seen} rw - tmpfs tmpfs rw\n`);
  const make = (dir: string, name: string) => {
    writeFileSync(join(dir, name), '');
    return join(dir, name);
  };
  return { seen, unseen, make, observer: new NetnsObserver([seen, unseen], mountinfo) };
}

async function* once<T>(item: T): AsyncGenerator<T> {
  yield item;
}

describe('ReleasePipeline', () => {
  it('spares allocations younger than the resync grace and releases the rest whose container is gone', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new SqliteStore({ path: ':memory:' });
    const { allocator, pipeline, done } = await releaseHarness(clock, store, { node: 'n1', resyncGraceMs: 30_000 });
    await allocator.allocate({ owner: owner('old-gone'), ranges });
    await allocator.allocate({ owner: owner('old-live'), ranges });
    clock.advance(50_000);
    await allocator.allocate({ owner: owner('new-gone'), ranges }); // an ADD still in flight
    await pipeline.resync(new Set(['old-live']));
    await pipeline.idle();
    assert.deepEqual(await held(store), ['new-gone', 'old-live']);
    assert.equal(pipeline.containerStatus().released, 1);
    // Events for a container that holds nothing stop at one look-up and change nothing.
    pipeline.push(
      containerIntent({ kind: 'container-delete', namespace: 'ns', containerID: 'nobody' }, momentOf(clock)),
    );
    await pipeline.idle();
    assert.equal(pipeline.containerStatus().released, 1);
    await done();
    await store.close();
  });

  it("keeps an exited container's address while its namespace exists, and releases it when the netns directory loses the entry", async () => {
    const clock = new ManualClock(1_000_000);
    const store = new SqliteStore({ path: ':memory:' });
    const ns = namespaces();
    const { allocator, pipeline, done } = await releaseHarness(clock, store, { observer: ns.observer });
    const netns = ns.make(ns.seen, 'ns-exit');
    await allocator.allocate({ owner: owner('c-exit'), ranges, netns });
    pipeline.push(
      containerIntent(
        { kind: 'task-exit', namespace: 'ns', containerID: 'c-exit', pid: 1, exitStatus: 0 },
        momentOf(clock),
      ),
    );
    await pipeline.idle();
    assert.deepEqual(
      pipeline.containerStatus().exited.map((e) => [e.containerID, e.waitingFor]),
      [['c-exit', netns]],
    );
    assert.deepEqual(await held(store), ['c-exit'], 'a process exiting is not proof');
    rmSync(netns);
    await consumeNetnsRemovals(
      once<NetnsRemoval>({ dir: ns.seen, name: 'ns-exit' }),
      () => pipeline.hasExited && pipeline.recheckExited(),
    );
    await pipeline.idle();
    assert.deepEqual(await held(store), []);
    assert.deepEqual(pipeline.containerStatus().exited, []);
    assert.equal(pipeline.containerStatus().released, 1);
    await done();
    await store.close();
  });

  it('backs a failing container off on its own while other keys go on, and acknowledges an intent only after its release commits', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const { allocator, pipeline, done } = await releaseHarness(clock, store);
    await allocator.allocate({ owner: owner('bad'), ranges });
    await allocator.allocate({ owner: owner('good'), ranges });
    store.failListing = 'bad';
    pipeline.push({ kind: 'container-deleted', containerID: 'bad', observedAt: momentOf(clock) });
    let acks = 0;
    const intent: ReleaseIntent = {
      kind: 'journal-del',
      file: 'good.release',
      owner: owner('good'),
      recordedAt: momentOf(clock),
      ack: () => (acks += 1),
    };
    pipeline.push(intent);
    await waitFor('the good owner to be released', async () =>
      (await store.list({ containerID: 'good' })).length === 0 ? true : undefined,
    );
    assert.equal(acks, 1, 'acknowledged once, after the commit');
    assert.deepEqual(pipeline.containerStatus().queue, [
      { key: 'bad', queued: 1, failures: 1, lastError: 'store away (injected)', retryAt: 1_001_000 },
    ]);

    store.failCommits = true;
    let lateAcks = 0;
    const late: ReleaseIntent = {
      kind: 'journal-del',
      file: 'bad.release',
      owner: owner('bad'),
      recordedAt: momentOf(clock),
      ack: () => (lateAcks += 1),
    };
    pipeline.push(late);
    await waitFor('the commit to fail', () => (pipeline.attempts(late)?.failures === 1 ? true : undefined));
    assert.equal(lateAcks, 0, 'no ack while the release has not committed');
    assert.equal(pipeline.attempts(late)?.retryAt, 1_001_000);
    store.failCommits = false;
    store.failListing = undefined;
    clock.advance(1_000);
    await pipeline.idle();
    assert.equal(lateAcks, 1);
    assert.equal(pipeline.attempts(late), undefined, 'done with');
    assert.deepEqual(await held(store), []);
    await done();
    await store.close();
  });

  it('settles an attachment before its ADD: a queued release is applied at once, or the ADD is told to try again', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const ns = namespaces();
    const { allocator, pipeline, done } = await releaseHarness(clock, store, { observer: ns.observer });
    const netns = join(ns.seen, 'ns-settle'); // never created: gone
    await allocator.allocate({ owner: owner('c-settle'), ranges, netns });
    store.failCommits = true;
    const intent: ReleaseIntent = { kind: 'netns-gone', owner: owner('c-settle'), netns, createdAt: momentOf(clock) };
    pipeline.push(intent);
    await waitFor('the release to fail', () => (pipeline.attempts(intent)?.failures === 1 ? true : undefined));
    await assert.rejects(
      pipeline.applyPending(owner('c-settle')),
      (e: Error & { code?: string }) =>
        e.code === 'TRY_AGAIN' &&
        /a release of container c-settle \(eth0\) is pending and could not be applied yet: disk I\/O error/.test(
          e.message,
        ),
    );
    store.failCommits = false;
    await pipeline.applyPending(owner('c-settle')); // the backoff (2 s now) is cut short: no clock moved
    assert.deepEqual(await held(store), []);
    await pipeline.applyPending(owner('nothing-queued'));
    await done();
    await store.close();
  });

  it('a container-deleted event retried after a DEL + ADD of the same container ID never releases the new allocation', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const { allocator, pipeline, done } = await releaseHarness(clock, store);
    const [old] = await allocator.allocate({ owner: owner('c-late'), ranges });
    clock.advance(10);
    store.failListing = 'c-late'; // the store is busy when the event comes
    const event = containerIntent(
      { kind: 'container-delete', namespace: 'ns', containerID: 'c-late' },
      momentOf(clock),
    );
    pipeline.push(event);
    await waitFor('the deleted event to fail once', () =>
      pipeline.containerStatus().queue[0]?.failures === 1 ? true : undefined,
    );
    store.failListing = undefined;
    clock.advance(10);
    // Meanwhile the runtime reused the ID: DEL, then ADD (directly, as an ADD that raced the event would).
    await allocator.release(owner('c-late'));
    clock.advance(10);
    const [fresh] = await allocator.allocate({ owner: owner('c-late'), ranges });
    assert.notEqual(fresh?.allocation.address, old?.allocation.address);
    clock.advance(1_000); // the retry
    await pipeline.idle();
    assert.deepEqual(
      (await store.list({ containerID: 'c-late' })).map((a) => a.address),
      [fresh?.allocation.address],
      'the new allocation stays',
    );
    assert.deepEqual(pipeline.containerStatus().queue, []);
    await done();
    await store.close();
  });

  it('an ADD settles the container queue of its container ID: a backed-off runtime event is applied before the ADD, never after it', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const { allocator, pipeline, done } = await releaseHarness(clock, store);
    const [old] = await allocator.allocate({ owner: owner('c-settled'), ranges });
    clock.advance(10);
    store.failListing = 'c-settled';
    pipeline.push(
      containerIntent({ kind: 'container-delete', namespace: 'ns', containerID: 'c-settled' }, momentOf(clock)),
    );
    await waitFor('the deleted event to fail once', () =>
      pipeline.containerStatus().queue[0]?.failures === 1 ? true : undefined,
    );
    // While the store is still busy, the ADD is told to try again rather than get the address the event releases.
    await assert.rejects(
      pipeline.applyPending(owner('c-settled')),
      (e: Error & { code?: string }) => e.code === 'TRY_AGAIN' && /store away/.test(e.message),
    );
    store.failListing = undefined;
    clock.advance(10);
    await pipeline.applyPending(owner('c-settled'));
    assert.deepEqual(pipeline.containerStatus().queue, [], 'applied by the settle');
    assert.deepEqual(await held(store), [], 'the old address went with the container');
    const [fresh] = await allocator.allocate({ owner: owner('c-settled'), ranges });
    assert.notEqual(fresh?.allocation.address, old?.allocation.address);
    clock.advance(300_000);
    await pipeline.idle();
    assert.deepEqual(await held(store), ['c-settled']);
    await done();
    await store.close();
  });

  it('does not queue a look-again intent twice for one key', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const { allocator, pipeline, done } = await releaseHarness(clock, store);
    await allocator.allocate({ owner: owner('c-look'), ranges, netns: '/nowhere/ns' });
    store.failCommits = true;
    store.failListing = 'c-look';
    const sweep: ReleaseIntent = {
      kind: 'netns-gone',
      owner: owner('c-look'),
      netns: '/nowhere/ns',
      createdAt: momentOf(clock),
    };
    assert.equal(pipeline.push(sweep), true);
    assert.equal(pipeline.push({ ...sweep }), false, 'the one queued looks at the state when it runs');
    assert.equal(
      pipeline.push({ kind: 'namespace-recheck', containerID: 'c-look', observedAt: momentOf(clock) }),
      true,
    );
    assert.equal(
      pipeline.push({ kind: 'namespace-recheck', containerID: 'c-look', observedAt: momentOf(clock) }),
      false,
    );
    assert.equal(
      pipeline.push({ kind: 'container-deleted', containerID: 'c-look', observedAt: momentOf(clock) }),
      true,
      'other intents always queue',
    );
    await waitFor('the container key to back off', () =>
      pipeline.containerStatus().queue[0]?.failures === 1 ? pipeline.containerStatus().queue[0] : undefined,
    );
    assert.equal(pipeline.containerStatus().queue[0]?.queued, 2);
    await done();
    await store.close();
  });

  it("judges a runtime adapter's resync and events only over the allocations under its namespace prefixes, and counts its releases apart from containerd's", async () => {
    const clock = new ManualClock(1_000_000);
    const store = new SqliteStore({ path: ':memory:' });
    const ns = namespaces();
    const { allocator, pipeline, done } = await releaseHarness(clock, store, {
      node: 'n1',
      resyncGraceMs: 30_000,
      observer: ns.observer,
    });
    const podmanNs = (name: string) => ns.make(ns.seen, `netns-${name}`);
    await allocator.allocate({ owner: owner('podman-gone'), ranges, netns: podmanNs('a') });
    await allocator.allocate({ owner: owner('podman-live'), ranges, netns: podmanNs('b') });
    await allocator.allocate({ owner: owner('containerd-one'), ranges, netns: ns.make(ns.seen, 'cni-c') });
    await allocator.allocate({ owner: owner('podman-exits'), ranges, netns: podmanNs('d') });
    clock.advance(60_000);
    const acks: unknown[] = [];
    const items = new AsyncChannel<RuntimeItem>();
    const consuming = consumeRuntimeAdapter('podman', items, pipeline, new NetnsScopes([]), clock);
    // Podman removed the gone container's namespace; the adapter lists only its own live
    // containers: containerd's is not its to judge.
    rmSync(join(ns.seen, 'netns-a'));
    items.push({
      kind: 'resync',
      listing: { ids: ['podman-live', 'podman-exits'], netnsPrefixes: [join(ns.seen, 'netns-')] },
      ack: (error?: unknown) => acks.push(error ?? 'ok'),
    });
    await waitFor('the resync to be acknowledged', () => (acks.length === 1 ? true : undefined));
    await pipeline.idle();
    assert.deepEqual(await held(store), ['containerd-one', 'podman-exits', 'podman-live']);
    // An exit waits for the namespace; a delete of another runtime's container changes nothing.
    items.push({ kind: 'event', event: { id: 'podman-exits', kind: 'exited', time: clock.now() } });
    items.push({ kind: 'event', event: { id: 'containerd-one', kind: 'deleted', time: clock.now() } });
    items.push({ kind: 'event', event: { id: 'podman-live', kind: 'created', time: clock.now() } });
    await waitFor('the exit to be judged', () =>
      pipeline.containerStatus('podman').exited.length === 1 ? true : undefined,
    );
    await pipeline.idle();
    assert.deepEqual(await held(store), ['containerd-one', 'podman-exits', 'podman-live']);
    assert.deepEqual(
      pipeline.containerStatus().exited,
      [],
      "containerd's status does not show the adapter's waiting container",
    );
    // Removed: podman tears its namespace down first (an adapter's word alone frees nothing whose namespace is there).
    rmSync(join(ns.seen, 'netns-d'));
    items.push({ kind: 'event', event: { id: 'podman-exits', kind: 'deleted', time: clock.now() } });
    items.close();
    await consuming;
    await pipeline.idle();
    assert.deepEqual(await held(store), ['containerd-one', 'podman-live']);
    assert.equal(pipeline.containerStatus('podman').released, 2);
    assert.equal(pipeline.containerStatus().released, 0);
    await done();
    await store.close();
  });

  it('never lets a containerd resync release what a runtime adapter said is its own (a podman container is not a gone containerd one)', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new SqliteStore({ path: ':memory:' });
    const { allocator, pipeline, done } = await releaseHarness(clock, store, { node: 'n1', resyncGraceMs: 0 });
    await allocator.allocate({ owner: owner('podman-one'), ranges, netns: '/run/netns/netns-1' });
    await allocator.allocate({ owner: owner('containerd-gone'), ranges, netns: '/var/run/netns/cni-2' });
    clock.advance(1_000);
    await pipeline.resync(new Set(['podman-one']), { adapter: 'podman', netnsPrefixes: ['/run/netns/netns-'] });
    await pipeline.resync(new Set());
    await pipeline.idle();
    assert.deepEqual(await held(store), ['podman-one']);
    assert.equal(pipeline.containerStatus().released, 1);
    await done();
    await store.close();
  });

  it('acknowledges a containerd resync once its intents are queued, and with the error when the store cannot be listed', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const { allocator, pipeline, done } = await releaseHarness(clock, store);
    await allocator.allocate({ owner: owner('gone-while-away'), ranges });
    const acks: unknown[] = [];
    const items = new AsyncChannel<ContainerdItem>();
    const consuming = consumeContainerd(items, pipeline, clock);
    items.push({ kind: 'resync', live: new Set(), ack: (error?: unknown) => acks.push(error ?? 'ok') });
    await waitFor('the resync to be acknowledged', () => (acks.length === 1 ? true : undefined));
    assert.equal(acks[0], 'ok');
    await pipeline.idle();
    assert.deepEqual(await held(store), []);
    store.failListing = 'any';
    items.push({ kind: 'resync', live: new Set(), ack: (error?: unknown) => acks.push(error ?? 'ok') });
    items.close();
    await consuming;
    assert.match(String(acks[1]), /store away/, 'the source is told, so it resubscribes and lists again');
    await done();
    await store.close();
  });
});

describe('the reconcile pass', () => {
  it("sweeps through the pipeline: releases what is provably gone, only this node's, and says what it could not see", async () => {
    const clock = new ManualClock(1_000_000);
    const store = new SqliteStore({ path: ':memory:' });
    const ns = namespaces();
    const { allocator, reconciler, done } = await releaseHarness(clock, store, {
      observer: ns.observer,
      releaseGoneNetns: true,
      onlyNode: 'n',
    });
    const theirs = new Allocator({ store, clock, node: 'other' });
    await allocator.allocate({ owner: owner('gone'), ranges, netns: join(ns.seen, 'ns-gone') });
    await allocator.allocate({ owner: owner('there'), ranges, netns: ns.make(ns.seen, 'ns-there') });
    await allocator.allocate({ owner: owner('unseen'), ranges, netns: join(ns.unseen, 'ns-x') });
    await theirs.allocate({ owner: owner('theirs'), ranges, netns: join(ns.seen, 'ns-theirs') });
    const report = await reconciler.tick();
    assert.equal(report.netnsReleased, 1);
    assert.match(report.unobservable.join(' '), /is not a mount point/);
    assert.deepEqual(await held(store), ['theirs', 'there', 'unseen']);
    await done();
    await store.close();
  });

  it("reports what it could not see in the observer's words, whatever sentence the audit puts around them", async () => {
    const clock = new ManualClock(1_000_000);
    const store = new SqliteStore({ path: ':memory:' });
    const ns = namespaces();
    const { allocator, reconciler, done } = await releaseHarness(clock, store, {
      observer: ns.observer,
      releaseGoneNetns: true,
    });
    const unseen = join(ns.unseen, 'ns-x');
    await allocator.allocate({ owner: owner('unseen'), ranges, netns: unseen });
    const said = ns.observer.observe(unseen);
    assert.equal(said.kind, 'unobservable');
    const because = said.kind === 'unobservable' ? said.reason : '';
    const verdict = (await reconciler.audit(false)).findings[0]?.verdict;
    assert.ok(verdict?.kind === 'suspect' && verdict.why === 'unobservable', JSON.stringify(verdict));
    assert.equal(verdict.unobservableBecause, because, 'the reason is a field of its own, not cut out of the sentence');
    assert.ok(verdict.reason.includes(because), 'the sentence still says it');
    assert.deepEqual((await reconciler.tick()).unobservable, [because]);
    await done();
    await store.close();
  });

  it('audit --fix releases the provably stale through the pipeline: a pending journaled DEL and a gone namespace', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new FlakyStore({ path: ':memory:' });
    const ns = namespaces();
    const { allocator, dir, reconciler, done } = await releaseHarness(clock, store, { observer: ns.observer });
    await allocator.allocate({ owner: owner('netns-gone'), ranges, netns: join(ns.seen, 'ns-a') });
    await allocator.allocate({ owner: owner('journaled'), ranges, netns: ns.make(ns.seen, 'ns-b') });
    await allocator.allocate({ owner: owner('healthy'), ranges, netns: ns.make(ns.seen, 'ns-c') });
    store.failCommits = true;
    recordMissedDelete(dir, {
      format: 1,
      ...owner('journaled'),
      recordedAt: clock.now(),
      stamp: { boot: 'manual-boot', at: clock.monotonic() },
      reason: 'test',
    });
    await waitFor('the DEL to be pending', () => (reconciler.status().pending[0]?.failures === 1 ? true : undefined));
    store.failCommits = false;
    const report = await reconciler.audit(true);
    assert.deepEqual(report.counts, { healthy: 1, stale: 2, suspect: 0 });
    assert.deepEqual(report.released?.map((a) => a.containerID).sort(), ['journaled', 'netns-gone']);
    assert.deepEqual(report.errors, []);
    assert.deepEqual(await held(store), ['healthy']);
    assert.deepEqual(reconciler.status().pending, []);
    await done();
    await store.close();
  });
});
