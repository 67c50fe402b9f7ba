/**
 * Liveness on demand (src/store/kubernetes/lease-ping.ts, issue 36): an idle agent renews nothing,
 * so a lapsed Lease is pinged and counts as gone only when unanswered. On the fake API server with a
 * manual clock: a live idle node answers (one write) and is alive; a crashed one is not, after the
 * ping time, and its Lease is vacated so the next asker knows at once; a live node whose Lease was
 * vacated behind its back (cut off while pinged) stops allocating; and the holder's answers are
 * bounded whatever a pinger writes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { ManualClock } from '../../../src/core/clock.ts';
import { KubeApiClient } from '../../../src/store/kubernetes/api-client.ts';
import {
  type LeaseView,
  PING_ANNOTATION,
  PONG_ANNOTATION,
  vacatedObject,
} from '../../../src/store/kubernetes/lease-objects.ts';
import { PingAnswers } from '../../../src/store/kubernetes/lease-ping.ts';
import { nodeLeaseName } from '../../../src/store/kubernetes/names.ts';
import { Resource, leaseKind } from '../../../src/store/kubernetes/resources.ts';
import { type KubeTier, openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { waitFor } from '../../helpers/processes.ts';

const NAMESPACE = 'warren-system';
const LEASE_SECONDS = 300;
const PING_SECONDS = 30;

describe('a lapsed Lease, asked', () => {
  let fake: FakeKubeApi;
  const clock = new ManualClock(Date.now());
  const opened: KubeTier[] = [];
  const closers: (() => void)[] = [];
  const kubeConfig = (): KubeConfig => {
    const k = new KubeConfig();
    k.loadFromFile(fake.kubeconfigPath);
    return k;
  };
  /** A tier on `on` (this test's clock, or one running ahead of it). */
  const tier = async (on: ManualClock = clock): Promise<KubeTier> => {
    const t = await openKubeTier({
      kubeConfig: kubeConfig(),
      namespace: NAMESPACE,
      leaseSeconds: LEASE_SECONDS,
      pingSeconds: PING_SECONDS,
      clock: on,
    });
    opened.push(t);
    return t;
  };
  /** Announces `node` on a tier of its own, and waits until its Lease is watched (it answers pings from there). */
  const announced = async (node: string, on: ManualClock = clock): Promise<KubeTier> => {
    const t = await tier(on);
    const from = fake.requests.length;
    await t.membership.announce(node, { since: on.now(), version: 'test', instance: `i-${node}` });
    await waitFor('the watch of its Lease', () =>
      fake.requests
        .slice(from)
        .some((r) => r.verb === 'watch' && r.query.fieldSelector === `metadata.name=${nodeLeaseName(node)}`)
        ? true
        : undefined,
    );
    return t;
  };
  /** `work` settled, the clock moved a second at a time meanwhile (the asker's reads, the deadline). */
  const driven = async <T>(work: Promise<T>): Promise<T> => {
    let settled = false;
    const done = work.finally(() => {
      settled = true;
    });
    done.catch(() => undefined);
    await waitFor('the work to settle with the clock moving', () => (settled ? true : void clock.advance(1000)));
    return done;
  };
  const leaseOfNode = (node: string) => fake.object('leases', nodeLeaseName(node), NAMESPACE);
  const updatesOf = (node: string, from: number) =>
    fake.requests.slice(from).filter((r) => r.verb === 'update' && r.path.endsWith(`/${nodeLeaseName(node)}`));

  before(async () => {
    fake = await startFakeKubeApi({ crds: 'deploy' });
  });
  after(async () => {
    for (const close of closers) close();
    for (const t of opened) await t.close();
    await fake.stop();
  });

  it('a live idle agent answers, and is alive: the ping and its answer are the only writes', async () => {
    await announced('ping-live');
    const asker = await announced('ping-asker-1');
    clock.advance(LEASE_SECONDS * 1000 + 1000); // idle: its Lease lapsed, unrenewed
    const from = fake.requests.length;
    assert.equal(await driven(asker.membership.alive('ping-live')), true);
    assert.equal(updatesOf('ping-live', from).length, 2, 'one ping, one answer');
    const lease = leaseOfNode('ping-live');
    assert.equal((lease?.spec as Record<string, unknown> | undefined)?.holderIdentity, 'i-ping-live');
    const annotations = lease?.metadata.annotations ?? {};
    assert.match(annotations[PONG_ANNOTATION] ?? '', /^ping-asker-1\/i-ping-asker-1\//, 'the answer names the ping');
    assert.equal(annotations[PING_ANNOTATION], undefined, 'and clears it');
    // The answer renewed it: asked again within the lease, it is alive with no ping.
    const again = fake.requests.length;
    assert.equal(await asker.membership.alive('ping-live'), true);
    assert.equal(updatesOf('ping-live', again).length, 0);
  });

  it('a crashed agent whose clock ran an hour ahead is pinged, its Lease renewed "in the future" no proof', async () => {
    // Found with the soak's kubernetes seed 3817 (a node's clock an hour ahead): its Lease read as running
    // for an hour after it died, so every node asking without being told it was gone took it for alive.
    const ahead = new ManualClock(clock.now() + 3_600_000);
    const dead = await announced('ping-ahead', ahead);
    await dead.close(); // kill -9
    const asker = await announced('ping-asker-ahead');
    assert.equal(await driven(asker.membership.alive('ping-ahead')), false, 'unanswered: gone');
    const live = await announced('ping-ahead-live', ahead);
    assert.equal(await driven(asker.membership.alive('ping-ahead-live')), true, 'a live one answers');
    await live.membership.withdraw();
  });

  it('a crashed agent does not answer: gone after the ping time, its Lease vacated, so the next asker knows at once', async () => {
    const crashed = await announced('ping-dead');
    await crashed.close(); // kill -9: no withdrawal
    const asker = await announced('ping-asker-2');
    clock.advance(LEASE_SECONDS * 1000 + 1000);
    const started = clock.monotonic();
    assert.equal(await driven(asker.membership.alive('ping-dead')), false);
    assert.ok(clock.monotonic() - started >= PING_SECONDS * 1000, 'not before the ping time');
    const lease = leaseOfNode('ping-dead');
    assert.equal((lease?.spec as Record<string, unknown> | undefined)?.holderIdentity, undefined, 'vacated');
    assert.ok(!(await asker.membership.liveNodes()).some((n) => n.node === 'ping-dead'), 'no longer listed');
    const from = fake.requests.length;
    assert.equal(await asker.membership.alive('ping-dead'), false);
    assert.equal(updatesOf('ping-dead', from).length, 0, 'no second ping');
    // Its agent, back, takes the vacated announcement over at once.
    const back = await tier();
    await back.membership.announce('ping-dead', { since: clock.now(), version: 'test', instance: 'i-back' });
    assert.equal(back.membership.halted(), undefined);
    assert.equal(await asker.membership.alive('ping-dead'), true);
    await back.membership.withdraw();
  });

  it('a live agent whose Lease is vacated behind its back (it could not answer in time) stops allocating', async () => {
    const live = await announced('ping-cut-off');
    const api = await KubeApiClient.open({ kubeConfig: kubeConfig() });
    closers.push(() => api.close());
    const leases = new Resource(api, leaseKind(NAMESPACE));
    const vacated = vacatedObject(await leases.get('read', nodeLeaseName('ping-cut-off')));
    assert.ok(vacated);
    assert.equal((await leases.replace('vacate', vacated)).kind, 'replaced');
    const halted = await waitFor('the node to halt', () => live.membership.halted());
    assert.match(halted, /found gone by another node: this agent did not answer its ping in time/);
  });
});

describe("the holder's answers to pings", () => {
  const pinged = (id: string, pong?: string): LeaseView => ({
    name: 'n',
    uid: 'u',
    version: '1',
    holder: 'me',
    expires: 0,
    renewed: 0,
    transitions: 0,
    acquired: undefined,
    annotations: { [PING_ANNOTATION]: id, ...(pong === undefined ? {} : { [PONG_ANNOTATION]: pong }) },
  });

  it('answers each ping once, at once when it has not answered for 5 s', async () => {
    const clock = new ManualClock(0);
    const answered: string[] = [];
    const answers = new PingAnswers(clock, 30_000, async (id) => {
      answered.push(id);
      return true;
    });
    answers.seen(pinged('a/1'));
    await Promise.resolve();
    assert.deepEqual(answered, ['a/1']);
    answers.seen(pinged('a/1', 'a/1')); // its own answer, seen on its watch
    answers.seen(pinged('a/1')); // the same ping again
    clock.advance(10_000);
    await Promise.resolve();
    assert.deepEqual(answered, ['a/1'], 'a ping is answered once');
    answers.seen(pinged('a/2'));
    await Promise.resolve();
    assert.deepEqual(answered, ['a/1', 'a/2']);
    answers.close();
  });

  it('writes at most one answer per 5 s however often a pinger writes, answering the latest', async () => {
    const clock = new ManualClock(0);
    const answered: string[] = [];
    const answers = new PingAnswers(clock, 30_000, async (id) => {
      answered.push(id);
      return true;
    });
    // A hostile pinger: a new ping every 100 ms for a minute.
    for (let i = 0; i < 600; i++) {
      answers.seen(pinged(`x/${i}`));
      await Promise.resolve();
      clock.advance(100);
      await Promise.resolve();
    }
    assert.ok(answered.length <= 13, `${answered.length} answers in 60 s`);
    assert.ok(answered.length >= 11, 'yet every ping is answered within 5 s');
    clock.advance(5000);
    await Promise.resolve();
    assert.equal(answered.at(-1), 'x/599', 'the latest ping is answered');
    answers.close();
  });
});
