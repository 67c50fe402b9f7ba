/**
 * Warren on Kubernetes, end to end: the agent (in this process, on a ManualClock so the pod-gone
 * grace is stepped, not slept) watches pods through a fake API server that speaks the real wire
 * protocol over TLS with a bearer token (test/helpers/fake-kube-api.ts: no API server can run on
 * this machine); addresses come from the real plugin executable (the installed forwarder) into
 * real network namespaces. No CNI DEL is sent anywhere in this file.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { REASON_RELEASED } from '../../src/agent/kubernetes/releases.ts';
import { resolveAgentOptions } from '../../src/agent/settings/options.ts';
import type { AgentStatus } from '../../src/api/status.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { type FakeKubeApi, type KubeObject, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { createNetns, deleteNetns } from '../helpers/netns.ts';
import { WARREN_BIN, isRoot, removeDir, run, tempDir, waitFor } from '../helpers/processes.ts';
import { silentLogger } from '../helpers/logger.ts';

const NODE = 'kube-node-1';
const GRACE_SECONDS = 600;
const skip = !isRoot() ? 'needs root for network namespaces' : false;

interface Running {
  readonly agent: Agent;
  readonly socket: string;
}

describe('Kubernetes pod garbage collection', { skip }, () => {
  let api: FakeKubeApi;
  let dir: string;
  let clock: ManualClock;
  let running: Running | undefined;
  const namespaces: string[] = [];

  const start = async (): Promise<Running> => {
    const socket = join(dir, 'warren.sock');
    const options = resolveAgentOptions(
      {
        stateDir: dir,
        socket,
        nodeName: NODE,
        journalDir: join(dir, 'journal'),
        netnsDirs: '/var/run/netns',
        containerd: 'off',
        kubernetes: 'on',
        // This file is about pod garbage collection on one node: its own store (the default with
        // Kubernetes on is the kubernetes store), serving its node-local range.
        store: 'sqlite',
        kubeconfig: api.kubeconfigPath,
        podGoneGraceSeconds: String(GRACE_SECONDS),
        metricsAddress: '127.0.0.1:0',
      },
      {},
    );
    const agent = new Agent(options, { clock, logger: silentLogger });
    await agent.start();
    running = { agent, socket };
    await waitFor('the pod watch to start', async () =>
      (await status()).kubernetes?.pods.state === 'watching' ? true : undefined,
    );
    return running;
  };
  const stop = async (): Promise<void> => {
    await running?.agent.stop();
    running = undefined;
  };
  const status = async (): Promise<AgentStatus> =>
    (await requestJson({ socket: running?.socket ?? '', method: 'GET', path: '/v1/status' })).body as AgentStatus;
  const held = async (uid: string): Promise<string[]> =>
    (
      (await requestJson({ socket: running?.socket ?? '', method: 'GET', path: `/v1/allocations?podUID=${uid}` }))
        .body as Allocation[]
    ).map((a) => a.address);

  const pod = (name: string, uid: string, extra: Partial<KubeObject> = {}): KubeObject =>
    api.createPod({
      metadata: { name, namespace: 'default', uid },
      spec: { nodeName: NODE, containers: [{ name: 'c', image: 'busybox' }] },
      status: { phase: 'Running' },
      ...extra,
    });

  /** ADD through the installed plugin, as the runtime does for the pod's sandbox. */
  const add = async (p: KubeObject, sandbox: string, netns: string): Promise<string> => {
    const meta = p.metadata as { name: string; namespace: string; uid: string };
    const reply = await warren({
      command: 'ADD',
      containerID: sandbox,
      netns,
      ifname: 'eth0',
      args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${meta.namespace};K8S_POD_NAME=${meta.name};K8S_POD_UID=${meta.uid};K8S_POD_INFRA_CONTAINER_ID=${sandbox}`,
      config: {
        cniVersion: '1.1.0',
        name: 'kube',
        ipam: { type: 'warren', socket: running?.socket, range: '10.244.1.0/24', node_local: true },
      },
    });
    assert.equal(reply.code, 0, reply.stdout);
    return resultAddresses(reply)[0] as string;
  };
  const netns = async (): Promise<{ name: string; path: string }> => {
    const ns = await createNetns();
    namespaces.push(ns.name);
    return ns;
  };
  const eventsFor = (name: string, reason: string): KubeObject[] =>
    api
      .listEvents('default')
      .filter((e) => (e.involvedObject as { name?: string } | undefined)?.name === name && e.reason === reason);

  before(async () => {
    api = await startFakeKubeApi();
    dir = tempDir('warren-kube-');
    clock = new ManualClock(Date.now());
    await start();
  });
  after(async () => {
    await stop();
    for (const name of namespaces) await deleteNetns(name).catch(() => undefined);
    await api?.stop();
    removeDir(dir);
  });

  it('releases a force-deleted pod as its namespace is deleted (the clock stands still), with a Normal Event naming the address', async (t) => {
    const p = pod('web-a', 'uid-force-1');
    const ns = await netns();
    const address = await add(p, 'sandbox-force-1', ns.path);
    api.deletePod('default', 'web-a', { force: true });
    await waitFor('the pod to be seen gone and kept while its namespace exists', async () =>
      (await status()).kubernetes?.releases.waiting.some((w) => w.uid === 'uid-force-1') ? true : undefined,
    );
    assert.deepEqual(
      await held('uid-force-1'),
      [address],
      'a pod object gone is not proof: the namespace still exists',
    );
    await deleteNetns(ns.name);
    const deleted = Date.now();
    await waitFor('the address to be released', async () =>
      (await held('uid-force-1')).length === 0 ? true : undefined,
    );
    t.diagnostic(`released ${Date.now() - deleted} ms after the namespace was deleted`);
    const event = await waitFor('the Event', () => eventsFor('web-a', REASON_RELEASED)[0]);
    assert.equal(event.type, 'Normal');
    assert.match(String(event.message), new RegExp(address.replace(/\./g, '\\.')));
    assert.match(String(event.message), /namespace is gone/);
    assert.deepEqual(event.source, { component: 'warren', host: NODE });
    assert.equal((event.involvedObject as { uid?: string }).uid, 'uid-force-1');
  });

  it('keeps a force-deleted pod whose namespace still exists until the grace ends on the clock, then releases it', async () => {
    const p = pod('web-b', 'uid-grace-1');
    const ns = await netns();
    const address = await add(p, 'sandbox-grace-1', ns.path);
    api.deletePod('default', 'web-b', { force: true });
    await waitFor('the pod to wait for its grace', async () =>
      (await status()).kubernetes?.releases.waiting.some((w) => w.uid === 'uid-grace-1') ? true : undefined,
    );
    clock.advance((GRACE_SECONDS - 1) * 1000);
    assert.deepEqual(await held('uid-grace-1'), [address], 'kept within the grace');
    clock.advance(2_000);
    await waitFor('the address to be released after the grace', async () =>
      (await held('uid-grace-1')).length === 0 ? true : undefined,
    );
    const event = await waitFor('the Event', () => eventsFor('web-b', REASON_RELEASED)[0]);
    assert.match(String(event.message), /grace period/);
  });

  it("a StatefulSet replacement (same name, new UID, ADDed before the old deletion is processed) keeps its address; the old pod's is released", async () => {
    const old = pod('db-0', 'uid-sts-old');
    const oldNs = await netns();
    const oldAddress = await add(old, 'sandbox-sts-old', oldNs.path);
    // The watch is held back: the old pod's deletion and the new pod arrive after the new ADD.
    await api.setUnavailable(true);
    api.deletePod('default', 'db-0', { force: true });
    const replacement = pod('db-0', 'uid-sts-new');
    const newNs = await netns();
    const newAddress = await add(replacement, 'sandbox-sts-new', newNs.path);
    await deleteNetns(oldNs.name);
    await api.setUnavailable(false);
    // The source reconnects after its backoff on the injected clock: the clock is stepped only while
    // the pod source is backing off (however long real time the reconnect takes), so it stays far
    // inside the pod-gone grace and the release comes from the namespace, not the grace.
    let stepped = 0;
    await waitFor("the old pod's address to be released", async () => {
      if ((await status()).kubernetes?.pods.state === 'backing-off') {
        clock.advance(1_000);
        stepped += 1_000;
      }
      return (await held('uid-sts-old')).length === 0 ? true : undefined;
    });
    assert.ok(stepped < GRACE_SECONDS * 1000, `the clock was stepped ${stepped} ms, inside the grace`);
    assert.notEqual(oldAddress, newAddress);
    assert.deepEqual(await held('uid-sts-new'), [newAddress], 'the replacement keeps its address');
  });

  it('finds deletions made while the agent was down by the resync after its listing', async () => {
    const p = pod('job-x', 'uid-down-1');
    const ns = await netns();
    const address = await add(p, 'sandbox-down-1', ns.path);
    const live = pod('keep-me', 'uid-live-1');
    const liveNs = await netns();
    const liveAddress = await add(live, 'sandbox-live-1', liveNs.path);
    await stop();
    api.deletePod('default', 'job-x', { force: true });
    await deleteNetns(ns.name);
    await start();
    await waitFor('the missed deletion to be released', async () =>
      (await held('uid-down-1')).length === 0 ? true : undefined,
    );
    assert.deepEqual(await held('uid-live-1'), [liveAddress], 'a listed pod keeps its address');
    assert.ok(address !== liveAddress);
  });

  it("keeps a static pod's address at the resync: its mirror pod, with another UID, counts through its config.mirror annotation", async () => {
    // The kubelet ADDs a static pod under its own UID (the config hash); the API server shows a
    // mirror pod with a UID of its own that names the hash in an annotation.
    api.createPod({
      metadata: {
        name: 'etcd-static',
        namespace: 'kube-system',
        uid: 'mirror-uid-1',
        annotations: { 'kubernetes.io/config.mirror': 'static-hash-1' },
      },
      spec: { nodeName: NODE, containers: [{ name: 'c', image: 'busybox' }] },
      status: { phase: 'Running' },
    });
    const ns = await netns();
    const staticPod: KubeObject = { metadata: { name: 'etcd-static', namespace: 'kube-system', uid: 'static-hash-1' } };
    const address = await add(staticPod, 'sandbox-static-1', ns.path);
    await stop();
    await start();
    await waitFor('the resync after the listing', async () =>
      ((await status()).kubernetes?.releases.resyncs ?? 0) > 0 ? true : undefined,
    );
    assert.deepEqual(await held('static-hash-1'), [address]);
    assert.equal((await status()).kubernetes?.releases.tracked, 0, 'nothing judged gone');
  });

  it('releases a finished Job pod (phase Succeeded) once its namespace is gone, while its object still exists', async () => {
    const p = pod('job-done', 'uid-succeeded-1');
    const ns = await netns();
    await add(p, 'sandbox-succeeded-1', ns.path);
    api.setPodPhase('default', 'job-done', 'Succeeded');
    await waitFor('the finished pod to wait for its namespace', async () =>
      (await status()).kubernetes?.releases.waiting.some((w) => w.uid === 'uid-succeeded-1') ? true : undefined,
    );
    await deleteNetns(ns.name);
    await waitFor('the address to be released', async () =>
      (await held('uid-succeeded-1')).length === 0 ? true : undefined,
    );
  });

  it('recovers by itself from a broken watch, a 410 as status and as event, and the API server away, releasing nothing it could not see', async () => {
    const p = pod('steady', 'uid-steady-1');
    const ns = await netns();
    const address = await add(p, 'sandbox-steady-1', ns.path);
    const pods = async () => (await status()).kubernetes?.pods;
    /** Waits, stepping the clock over the source's backoff, until `ok` holds of its status. */
    const until = (what: string, ok: (s: NonNullable<Awaited<ReturnType<typeof pods>>>) => boolean) =>
      waitFor(what, async () => {
        clock.advance(1_000);
        const s = await pods();
        return s !== undefined && ok(s) ? s : undefined;
      });
    /**
     * Nothing judged gone: a pod wrongly taken for gone would be tracked, waiting for its grace
     * (its namespace is alive), until the end of this test. Waited for, as a finished pod the
     * relist shows again is tracked for a moment before it is let go; and only once every listing
     * so far has been resynced, so a wrong judgement cannot come after the look.
     */
    const judgedNothing = async (fault: string): Promise<void> => {
      const releases = await waitFor(
        `every listing resynced and nothing tracked after ${fault}`,
        async () => {
          const k = (await status()).kubernetes;
          return k !== undefined && k.releases.resyncs >= k.pods.relists + 1 && k.releases.tracked === 0
            ? k.releases
            : undefined;
        },
        5_000,
      ).catch(async (error: unknown) => {
        throw new Error(
          `${(error as Error).message}; releases: ${JSON.stringify((await status()).kubernetes?.releases)}`,
        );
      });
      assert.ok(
        !releases.waiting.some((w) => w.uid === 'uid-steady-1'),
        `the steady pod is not waiting to be released after ${fault}`,
      );
      assert.deepEqual(await held('uid-steady-1'), [address], `the steady pod keeps its address after ${fault}`);
    };
    const start = (await pods())?.reconnects ?? 0;
    api.breakWatches();
    const broken = await until(
      'a re-watch after the broken stream',
      (s) => s.state === 'watching' && s.reconnects > start,
    );
    await judgedNothing('a broken watch');
    api.expireNextWatch('status');
    api.breakWatches();
    const expiredStatus = await until(
      'a relist after 410 as HTTP status',
      (s) => s.state === 'watching' && s.relists > broken.relists,
    );
    await judgedNothing('a 410 as HTTP status');
    api.expireNextWatch('event');
    api.breakWatches();
    const expiredEvent = await until(
      'a relist after 410 as an ERROR event',
      (s) => s.state === 'watching' && s.relists > expiredStatus.relists,
    );
    await judgedNothing('a 410 as an ERROR event');
    await api.setUnavailable(true, 'refuse');
    // First the open watch is cut, then every attempt is refused: status says so.
    await until(
      'the source to say it is backing off because the server refuses it',
      (s) => s.state === 'backing-off' && /ECONNREFUSED/.test(s.lastError ?? ''),
    );
    await judgedNothing('the API server away');
    await api.setUnavailable(false);
    await until('the source to be watching again', (s) => s.state === 'watching');
    assert.ok(expiredEvent.relists > broken.relists);
    await judgedNothing('the API server back');
    // Past the grace: anything judged gone on the way would be released now.
    clock.advance((GRACE_SECONDS + 1) * 1000);
    await judgedNothing('the grace period');
  });

  it('keeps serving CNI when Events are forbidden, and names the missing permission in status', async () => {
    api.forbid('create', 'events');
    try {
      const p = pod('no-events', 'uid-forbidden-1');
      const ns = await netns();
      await add(p, 'sandbox-forbidden-1', ns.path);
      await deleteNetns(ns.name);
      api.deletePod('default', 'no-events', { force: true });
      await waitFor('the address to be released', async () =>
        (await held('uid-forbidden-1')).length === 0 ? true : undefined,
      ).catch(async (e) => {
        throw new Error(`${(e as Error).message}; status: ${JSON.stringify((await status()).kubernetes)}`);
      });
      const s = await waitFor('status to name the missing permission', async () => {
        const k = (await status()).kubernetes;
        return k?.forbidden.some((f) => /create events/.test(f)) ? k : undefined;
      });
      assert.ok(s.events.refused >= 1);
      // What an operator reads: `warren status`, in words.
      const human = await run(process.execPath, [WARREN_BIN, 'status', '--socket', running?.socket ?? '']);
      assert.match(
        human.stdout,
        /^kubernetes: +FORBIDDEN: the service account may not create events$/m,
        human.stdout + human.stderr,
      );
      const other = await add(pod('after', 'uid-after-1'), 'sandbox-after-1', (await netns()).path);
      assert.ok(other.length > 0, 'CNI still serves');
    } finally {
      api.allow('create', 'events');
    }
    // The role fixed: the next Event is accepted and status stops naming the permission, no restart.
    const fixedNs = await netns();
    await add(pod('fixed', 'uid-fixed-1'), 'sandbox-fixed-1', fixedNs.path);
    await deleteNetns(fixedNs.name);
    api.deletePod('default', 'fixed', { force: true });
    await waitFor('the Event once allowed', () => eventsFor('fixed', REASON_RELEASED)[0]);
    await waitFor('status to stop naming the permission', async () =>
      (await status()).kubernetes?.forbidden.length === 0 ? true : undefined,
    );
    const human = await run(process.execPath, [WARREN_BIN, 'status', '--socket', running?.socket ?? '']);
    assert.doesNotMatch(human.stdout, /FORBIDDEN/);
  });

  it("refuses a whereabouts config through the plugin on this node's own store, so two nodes cannot hand out one address", async () => {
    const ns = await netns();
    const reply = await warren({
      command: 'ADD',
      containerID: 'sandbox-shared-1',
      netns: ns.path,
      ifname: 'net1',
      config: {
        cniVersion: '1.1.0',
        name: 'macvlan-net',
        ipam: { type: 'warren', socket: running?.socket, range: '192.168.2.224/28', datastore: 'kubernetes' },
      },
    });
    assert.equal(reply.json?.code, 7, reply.stdout);
    assert.match(String(reply.json?.msg), /not node-local.*--store kubernetes.*node_local/s);
  });
});
