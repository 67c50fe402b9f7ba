/**
 * Kubernetes' release side in process, as the agent wires it: the pod work queue and the release
 * pipeline over SQLite in memory, on a manual clock, with Events sent to the fake API server (real
 * wire, TLS, bearer token). A release that keeps failing is retried a bounded number of times and
 * then reported on the pod as a Warning; a release the containerd source caused (the sandbox
 * deleted) is reported on the pod as a Normal Event naming its address and why.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { CoreApi } from '../../../src/sources/kubernetes/core-api.ts';
import { OnDemandClient } from '../../../src/sources/kubernetes/on-demand-client.ts';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { ClusterEvents } from '../../../src/agent/kubernetes/events.ts';
import { KubernetesReleases, REASON_FAILED, REASON_RELEASED } from '../../../src/agent/kubernetes/releases.ts';
import { releasePipeline } from '../../../src/agent/release/core.ts';
import { consumeContainerd } from '../../../src/agent/release/consumers.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import { AsyncChannel } from '../../../src/core/async-channel.ts';
import { ExponentialBackoff } from '../../../src/core/backoff.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import type { ContainerdItem } from '../../../src/sources/containerd/event-source.ts';
import type { PodItem } from '../../../src/sources/kubernetes/pod-source.ts';
import { NetnsObserver } from '../../../src/sources/netns.ts';
import type { AllocationFilter } from '../../../src/store/store.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { type FakeKubeApi, type KubeObject, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { waitFor } from '../../helpers/processes.ts';
import { flush } from '../../helpers/event-loop.ts';
import { silentLogger } from '../../helpers/logger.ts';

const NODE = 'n1';
const ranges = parseIpamConfig({ type: 'warren', range: '10.248.0.0/24' }).ranges;

/** A store that cannot say what one pod holds while told to (etcd away for that read), counting the tries. */
class StuckPodStore extends SqliteStore {
  stuckPod: string | undefined;
  tries = 0;
  override async list(filter?: AllocationFilter): Promise<Allocation[]> {
    if (this.stuckPod !== undefined && filter?.podUID === this.stuckPod) {
      this.tries += 1;
      throw new Error('store unreachable (injected)');
    }
    return super.list(filter);
  }
}

describe('KubernetesReleases', () => {
  let api: FakeKubeApi;
  let core: CoreApi;
  let client: OnDemandClient;

  before(async () => {
    api = await startFakeKubeApi();
    const kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfigPath);
    client = OnDemandClient.of(kc);
    core = new CoreApi(client);
  });
  after(async () => {
    client?.close();
    await api?.stop();
  });

  /** The release side of one agent, running until the returned `stop`. */
  const wire = (clock: ManualClock, maxRetries = 5) => {
    const store = new StuckPodStore({ path: ':memory:' });
    const logger = silentLogger;
    const allocator = new Allocator({ store, clock, node: NODE });
    const events = new ClusterEvents({ api: core, node: NODE, clock, logger });
    let releases: KubernetesReleases | undefined;
    const { pipeline } = releasePipeline(
      {
        node: NODE,
        shared: false,
        ownerBackoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 300_000 }),
        containerBackoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 300_000 }),
        resyncGraceMs: 0,
        reconcileIntervalMs: 60_000,
        netnsGraceMs: 0,
        releaseGoneNetns: false,
        containerd: true,
      },
      {
        allocator,
        store,
        observer: new NetnsObserver([]),
        clock,
        logger,
        onReleased: (intent, released, why) => releases?.released(intent, released, why),
      },
    );
    releases = new KubernetesReleases({
      pipeline,
      store,
      clock,
      logger,
      node: NODE,
      graceMs: 600_000,
      maxRetries,
      events,
    });
    const pods = new AsyncChannel<PodItem>();
    const containerd = new AsyncChannel<ContainerdItem>();
    const abort = new AbortController();
    const loops = [releases.run(pods, abort.signal), consumeContainerd(containerd, pipeline, clock)];
    /** An ADD of the pod's sandbox, recorded with the pod as the plugin records it from CNI_ARGS. */
    const add = async (uid: string, name: string, sandbox: string): Promise<string> => {
      const assignments = await allocator.allocate({
        owner: { network: 'kube', containerID: sandbox, ifname: 'eth0' },
        ranges,
        podUID: uid,
        podNamespace: 'default',
        podName: name,
      });
      return assignments[0]?.allocation.address as string;
    };
    const stop = async (): Promise<void> => {
      abort.abort();
      pods.close();
      containerd.close();
      await Promise.all(loops);
      pipeline.stop();
    };
    return { store, releases: releases as KubernetesReleases, pods, containerd, add, stop };
  };

  const eventsOn = (uid: string, reason: string): KubeObject[] =>
    api.listEvents('default').filter((e) => (e.involvedObject as { uid?: string }).uid === uid && e.reason === reason);

  it('gives up on a release that keeps failing after the bounded retries, and says so on the pod with a Warning Event', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));
    const maxRetries = 3;
    const r = wire(clock, maxRetries);
    try {
      const address = await r.add('uid-stuck', 'stuck-0', 'sandbox-stuck');
      r.store.stuckPod = 'uid-stuck';
      r.pods.push({
        kind: 'gone',
        pod: {
          uid: 'uid-stuck',
          namespace: 'default',
          name: 'stuck-0',
          phase: 'Running',
          terminal: false,
          deleting: true,
        },
        because: 'deleted',
      });
      // Each retry waits out the queue's backoff (5 ms doubling) on the clock.
      const event = await waitFor('the Warning Event after the retries are spent', () => {
        clock.advance(100);
        return eventsOn('uid-stuck', REASON_FAILED)[0];
      });
      assert.equal(event.type, 'Warning');
      assert.match(String(event.message), new RegExp(`after ${maxRetries + 1} attempts: .*injected`));
      assert.deepEqual(event.source, { component: 'warren', host: NODE });
      assert.equal(r.store.tries, maxRetries + 1, 'one attempt and exactly maxRetries retries');
      const s = r.releases.status();
      assert.equal(s.gaveUp, 1);
      assert.equal(s.tracked, 0, 'the pod is let go: the resync after the next listing finds what it holds');
      // Bounded: no attempt after giving up, however long the clock runs.
      clock.advance(3_600_000);
      await flush();
      assert.equal(r.store.tries, maxRetries + 1);
      r.store.stuckPod = undefined;
      assert.deepEqual(
        (await r.store.list({ podUID: 'uid-stuck' })).map((a) => a.address),
        [address],
        'nothing was released',
      );
      assert.equal(eventsOn('uid-stuck', REASON_FAILED).length, 1, 'one Warning, not one per attempt');
    } finally {
      await r.stop();
    }
  });

  it('reports a release caused by containerd (the sandbox deleted) on the pod as a Normal Event naming the address', async () => {
    const clock = new ManualClock(Date.parse('2026-11-22T11:00:00Z'));
    const r = wire(clock);
    try {
      const address = await r.add('uid-sandbox', 'web-7', 'sandbox-web-7');
      r.containerd.push({
        kind: 'event',
        event: { kind: 'container-delete', namespace: 'k8s.io', containerID: 'sandbox-web-7' },
      });
      const event = await waitFor('the Normal Event on the pod', () => eventsOn('uid-sandbox', REASON_RELEASED)[0]);
      assert.equal(event.type, 'Normal');
      assert.equal(event.message, `released ${address}: sandbox deleted`);
      assert.deepEqual(event.involvedObject, {
        apiVersion: 'v1',
        kind: 'Pod',
        namespace: 'default',
        name: 'web-7',
        uid: 'uid-sandbox',
      });
      assert.deepEqual(await r.store.list({ podUID: 'uid-sandbox' }), []);
      assert.equal(r.releases.status().tracked, 0, 'Kubernetes did not have to judge the pod');
    } finally {
      await r.stop();
    }
  });
});
