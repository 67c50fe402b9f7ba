/**
 * The soak on the kubernetes store: the fake API server (test/helpers/fake-kube-api.ts, in this
 * process, the real wire protocol) with the CRDs of deploy/crds, a Node object per soak node, and
 * the agents on `--store kubernetes` with the pod source on (each pod of the workload a pod object
 * bound to its node: created before its first ADD, deleted when the workload deletes it, so a pod
 * gone from the API whose sandbox is gone is a provable orphan, as the agents' pod source judges it).
 * Every node on ONE network and ONE range (10.239.0.0/24 in blocks of 16): an address handed out
 * twice across nodes is a duplicate the auditor sees. The timers are the e2e tests' (lease 2 s,
 * upkeep 1 s: test/helpers/kube-store.ts); the publication settings are the defaults (`agentEnv`).
 *
 * Its faults (drawn by store-kube-plan.ts) and what the harness does for each:
 * - the API server stopped and started again: the agents serve from what they hold; an ADD that
 *   needs the API answers a CNI error (counted by the run);
 * - watch streams or every connection cut;
 * - the API server's etcd restored from an older snapshot: the agents that notice stop allocating
 *   (ADD 11, counted), and at `api-recover` the operator follows docs/recovery.md with the real CLI
 *   (`warren status`, then `warren store accept` on each node that stopped); from then on a node
 *   that stops later for that restore (it was down, it noticed late) is accepted as it says so;
 * - a WarrenBlock deleted by hand (`kubectl delete warrenblock`) whose owner's agent runs: its owner
 *   claims it again, and no other node hands out its addresses (test/e2e/claims-vanish.test.ts);
 * - a WarrenBlockPublication deleted by hand (`kubectl delete warrenblockpublication`) whose owner's
 *   agent runs: its watch of its publications tells it, and it writes the publication again at its
 *   next publication run (2 s), its block idle or not (test/store/tiered/kube.test.ts); the step
 *   waits for it (REPUBLISH_BOUND_MS), and one not written again by then, with the API server up
 *   and nothing to recover from, is a violation;
 * - a WarrenBlock edited by hand to name another running node: that node never made the claim, so it
 *   gives it back unused, and the owner claims it again (tiered/stray-claims.ts);
 * - a node's Lease deleted by hand: its agent stops allocating (its Lease gone reads as the store's
 *   data lost) until the operator accepts at `api-recover`, as after a restore;
 * - a node lost for good (plan.ts `node-lost`): its Node deleted (`lostNodes`), and, while a
 *   recovery waits for it, `warren node forget` on another node (docs/recovery.md).
 * A node that stops allocating with no restore behind it is a violation, as is a stop for another
 * reason than the store's data going back.
 * A node's state directory put back (plan.ts `restore-state`) keeps the addresses its publication
 * announced as placeholders: the operator accepts the store on it (docs/recovery.md) once no live
 * sandbox holds any of them (announced-placeholders.ts).
 *
 * Cleanup: `close()` stops the operator's timer and the API server (its certificates and
 * kubeconfigs removed); the agents are the nodes' (soak-node.ts).
 */
import { join } from 'node:path';
import { requestJson } from '../../src/core/unix-http.ts';
import { NODE_LABEL, blockName, labelValue, nodeLeaseName } from '../../src/store/kubernetes/names.ts';
import { type FakeKubeApi, type FakeSnapshot, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { KUBE_NAMESPACE, LEASE_SECONDS } from '../helpers/kube-store.ts';
import { CHILD_PATH, WARREN_BIN, run } from '../helpers/processes.ts';
import type { GroundTruth } from './ground-truth.ts';
import { placeholdersOf, storeAccept } from './announced-placeholders.ts';
import { KubeClusterAudit } from './kube-cluster-audit.ts';
import type { KubeAction } from './store-kube-plan.ts';
import { kubePlan } from './store-kube-plan.ts';
import { REPUBLISH_BOUND_MS, REPUBLISH_POLL_MS, unwrittenExcuse } from './republish.ts';
import { EventLosses } from './event-losses.ts';
import type { SoakStore, StoreBackend, StoreFaultContext, StoreNode, StoreStep } from './store.ts';

const NETWORK = { name: 'soak', range: '10.239.0.0/24', ipam: { block_size: 28 } } as const;
const POD_NAMESPACE = 'soak';
/** How often the connections are cut while the API server's listener closes (ms). */
const CUT_EVERY_MS = 50;
/** How often the operator looks at the nodes' status once it follows the recovery procedure. */
const OPERATOR_MS = 1_000;
/** How long the end waits for the operator's last accepts (ms). */
const SETTLE_BOUND_MS = 30_000;
/** How long the owner of a publication deleted by hand may take to write it again (ms; its runs are 2 s apart). */
/** What `warren status` says of a node that stopped because the store's data went back. */
const STORE_WENT_BACK = /lost its data|went backwards/;

class KubeSoakStore implements SoakStore {
  readonly sharedRange = true;
  readonly #api: FakeKubeApi;
  readonly #audit: KubeClusterAudit;
  /** Every node an agent was started for, by index (its socket is in its state directory). */
  /** The run's nodes (SoakNodes: how long their agents ran bounds the wait for a publication). */
  readonly #nodes = new Map<number, StoreNode & { runningMs?(from: number, to: number): number }>();
  #snapshot: FakeSnapshot | undefined;
  /** What took release Events away: the API server away, restored, its connections cut. */
  readonly #eventLosses = new EventLosses();
  /** The store's losses so far: restores, and Leases deleted by hand (each a halt the operator accepts). */
  #losses = 0;
  /** Whether the operator accepts a stopped node (after `api-recover`, until the next restore). */
  #accepting = false;
  #up = true;
  /** When the API server was taken away (api-stop), until it is back (api-start). */
  #stoppedAt: number | undefined;
  /** Since when the API server ran with nothing to recover from; undefined while it does not. */
  #calmSince: number | undefined = Date.now();
  readonly #unexpected: Array<{ key: string; what: string }> = [];
  readonly #operator: NodeJS.Timeout;
  #operating: Promise<void> = Promise.resolve();
  #context: StoreFaultContext | undefined;

  constructor(api: FakeKubeApi, nodes: number) {
    this.#api = api;
    for (let i = 0; i < nodes; i++) api.createNode(nodeName(i));
    this.#audit = new KubeClusterAudit(api, nodeName);
    this.#operator = setInterval(() => {
      this.#operating = this.#operating.then(() => this.#operate()).catch(() => {});
    }, OPERATOR_MS);
  }

  network(): typeof NETWORK {
    return NETWORK;
  }

  agentArgs(node: StoreNode): readonly string[] {
    this.#nodes.set(node.index, node);
    return [
      '--store',
      'kubernetes',
      '--kubernetes',
      'on',
      '--kubeconfig',
      this.#api.clientKubeconfig(node.name),
      '--kube-namespace',
      KUBE_NAMESPACE,
      '--node-lease',
      String(LEASE_SECONDS),
      '--node-ping',
      '2',
      '--upkeep-interval',
      '1',
    ];
  }

  /**
   * The publication settings a node runs with (their defaults), not the tests' (test/helpers/agent.ts
   * publishes every change at once and announces nothing): with nothing announced, an address handed
   * out since the last publication is unprotected when its block's claim is deleted by hand or lost
   * with a restore, which docs/recovery.md says of `ahead` 0 (seed 4242 found those duplicates).
   */
  agentEnv(): NodeJS.ProcessEnv {
    return { WARREN_PUBLISH_SETTLE: undefined, WARREN_PUBLISH_AHEAD: undefined };
  }

  readonly pods = {
    created: (pod: number, node: string, uid: string): void => {
      // A pod of that name a restore of the API server brought back is the old replica's: deleted first.
      if (this.#api.getPod(POD_NAMESPACE, `pod-${pod}`) !== undefined)
        this.#api.deletePod(POD_NAMESPACE, `pod-${pod}`, { force: true });
      this.#api.createPod({
        metadata: { name: `pod-${pod}`, namespace: POD_NAMESPACE, uid },
        spec: { nodeName: node, containers: [{ name: 'c', image: 'busybox' }] },
        status: { phase: 'Running' },
      });
    },
    deleted: (pod: number): void => {
      // Gone already when a restore took the API server back to before it was created.
      if (this.#api.getPod(POD_NAMESPACE, `pod-${pod}`) !== undefined)
        this.#api.deletePod(POD_NAMESPACE, `pod-${pod}`, { force: true });
    },
  };

  /**
   * A node lost for good is forgotten as Kubernetes forgets a machine that is gone: its Node object
   * deleted (by the cloud's node controller, or `kubectl delete node` by its operator; its pods were
   * deleted by the harness first, as the pod GC deletes a deleted Node's), after which exactly one
   * agent, the holder of the chore `forget-node/NAME`, frees its blocks once a ping of its Lease
   * went unanswered, lapsed or not (DESIGN C9, docs/kubernetes.md "Nodes"). `warren node forget` is
   * the etcd store's way in the soak (store-etcd.ts), so both paths run. Back, it registers its Node
   * again.
   */
  readonly lostNodes = {
    forget: async (lost: StoreNode): Promise<number> => {
      this.#forgotten.add(lost.name);
      this.#deleteNodes();
      return Date.now();
    },
    held: async (node: StoreNode) => ({
      blocks: this.#audit
        .claims()
        .filter((c) => c.node === node.name)
        .map((c) => c.key.slice(c.key.lastIndexOf('#') + 1)),
      containers: this.#audit.publishedContainers(node.name),
    }),
    away: (): boolean => this.#stoppedAt !== undefined,
    returned: (node: StoreNode): boolean => {
      this.#forgotten.delete(node.name);
      if (!this.#nodeExists(node.name)) this.#api.createNode(node.name);
      // Registered again while the API server is away: no agent saw its Node gone long enough to act.
      return this.lostNodes.away();
    },
  };

  eventLostBy(from: number, to: number): string | undefined {
    return this.#eventLosses.lostBy(from, to);
  }

  /** Nodes lost, their Node objects deleted, not back yet. */
  readonly #forgotten = new Set<string>();

  /** Whether the Node object exists (the fake keeps no reader of one; `objects` serves the CRDs only). */
  #nodeExists(name: string): boolean {
    try {
      this.#api.updateNode(name, () => {}); // a write that changes nothing: a no-op on the Node
      return true;
    } catch (error) {
      if (/no nodes /.test((error as Error).message)) return false;
      throw error;
    }
  }

  /** The Node of every node lost and not back deleted, again after a restore of the API server brought it back. */
  #deleteNodes(): void {
    for (const name of this.#forgotten) if (this.#nodeExists(name)) this.#api.deleteNode(name);
  }

  async runStep(step: StoreStep, context: StoreFaultContext): Promise<void> {
    this.#context = context;
    const action = step.action as KubeAction;
    switch (action) {
      case 'api-stop':
        this.#up = false;
        this.#calmSince = undefined;
        this.#stoppedAt ??= Date.now();
        this.#eventLosses.away(this.#stoppedAt);
        return this.#takeAway(step.arg === 1 ? '503' : 'refuse');
      case 'api-start':
        await this.#api.setUnavailable(false);
        this.#up = true;
        if (this.#losses === 0 || this.#accepting) this.#calmSince = Date.now();
        // No agent saw a Node deleted while the API server was away: a forget made just before it
        // went away counts from now (soak-run.ts: up to the bound before).
        if (this.#stoppedAt !== undefined) context.recovering(this.#stoppedAt);
        this.#stoppedAt = undefined;
        this.#eventLosses.back(Date.now());
        return;
      case 'watch-cut':
        if (step.arg === 1) {
          this.#api.cutConnections();
          this.#eventLosses.cut(Date.now());
        } else {
          if (step.arg === 2) this.#api.compactHistory(); // a resume is answered 410 Gone: a relist
          this.#api.breakWatches();
        }
        return;
      case 'api-snapshot':
        this.#snapshot = this.#api.snapshot();
        this.#eventLosses.snapshot(Date.now());
        return;
      case 'api-restore': {
        const snapshot = this.#snapshot;
        if (snapshot === undefined) throw new Error('api-restore with no snapshot kept');
        this.#snapshot = undefined;
        this.#losses += 1;
        this.#accepting = false;
        this.#calmSince = undefined;
        this.#api.restoreSnapshot(snapshot);
        this.#eventLosses.restored(Date.now());
        this.#deleteNodes(); // a machine gone for good stays gone: its Node is deleted again
        // A node whose file was put back and not compared yet took back nothing: what the
        // snapshot does not publish of it is lost with both (docs/recovery.md: objects written
        // since the backup are not in it).
        context.lostOutsideFiles((node) => this.#audit.publishedContainers(node.name));
        return;
      }
      case 'api-recover':
        // docs/recovery.md, "When the API server lost its data": no newer backup, so the store is
        // accepted as it is on every node that stopped; then status until no node is in recovery.
        // A lost node's forget frees nothing before: its releases count from here.
        context.recovering();
        this.#accepting = true;
        this.#operating = this.#operating.then(() => this.#operate());
        await this.#operating;
        if (this.#up) this.#calmSince = Date.now();
        return;
      case 'claim-delete': {
        // Any claim, published or not: a claim is published before its block's first address is
        // handed out (tiered/claim-announcements.ts), and that publication keeps another node off.
        const running = this.#audit.claims().filter((c) => this.#isServing(c.node));
        if (running.length === 0) return context.count('claim-delete with no block claimed');
        const claim = running[(step.arg ?? 0) % running.length];
        if (claim !== undefined) this.#api.deleteObject('warrenblocks', blockName(claim.key));
        return;
      }
      case 'publication-delete': {
        // `kubectl delete warrenblockpublication`: a block's (not a loan's) whose owner's agent runs.
        const running = this.#audit.publications().filter((p) => p.loan !== true && this.#isServing(p.node));
        if (running.length === 0) return context.count('publication-delete with no block published');
        const published = running[(step.arg ?? 0) % running.length];
        if (published === undefined) return;
        this.#api.deleteObject('warrenblockpublications', blockName(published.key));
        context.log(`kubernetes: the publication of block ${published.key} of ${published.node} deleted by hand`);
        return this.#writtenAgain(published.key, published.node, context);
      }
      case 'claim-edit': {
        // `kubectl edit warrenblock`: moved to another running node, label and spec. That node never
        // made the claim and gives it back; its owner claims it again (tiered/stray-claims.ts).
        const running = this.#audit.claims().filter((c) => this.#isServing(c.node));
        const claim = running[(step.arg ?? 0) % Math.max(1, running.length)];
        const others = [...this.#nodes.values()].filter((n) => n.name !== claim?.node && this.#isServing(n.name));
        const other = others[(step.arg ?? 0) % Math.max(1, others.length)];
        if (claim === undefined || other === undefined)
          return context.count('claim-edit with no block or node to move it to');
        this.#api.editObject('warrenblocks', blockName(claim.key), (o) => {
          o.metadata.labels = { ...(o.metadata.labels ?? {}), [NODE_LABEL]: labelValue(other.name) };
          (o.spec as Record<string, unknown>).node = other.name;
        });
        return;
      }
      case 'lease-delete': {
        // `kubectl delete lease`: nobody but its agent removes a live Lease, so its agent reads it as
        // the store's data lost and stops allocating until the operator accepts (docs/recovery.md).
        const serving = [...this.#nodes.values()].filter((n) => this.#isServing(n.name));
        const node = serving[(step.arg ?? 0) % Math.max(1, serving.length)];
        if (node === undefined) return context.count('lease-delete with no node running');
        this.#losses += 1;
        this.#accepting = false;
        this.#calmSince = undefined;
        this.#api.deleteObject('leases', nodeLeaseName(node.name), KUBE_NAMESPACE);
        return;
      }
      default: {
        const never: never = action;
        throw new Error(`the kubernetes store has no step ${String(never)}`);
      }
    }
  }

  /**
   * After a publication deleted by hand: waits until its owner writes it again (its watch of its
   * publications tells it; the next publication run writes it), the block given back or its agent
   * stopped meanwhile, or REPUBLISH_BOUND_MS; not written by then with the API server up, nothing
   * to recover from and its node allocating (no cluster problem in its status) is a violation.
   */
  async #writtenAgain(key: string, node: string, context: StoreFaultContext): Promise<void> {
    const from = Date.now();
    const owner = [...this.#nodes.values()].find((n) => n.name === node);
    while (Date.now() - from < REPUBLISH_BOUND_MS) {
      if (this.#audit.publications().some((p) => p.key === key && p.node === node)) {
        context.log(`kubernetes: ${node} wrote the publication of block ${key} again after ${Date.now() - from} ms`);
        return context.count('publication written again by its owner');
      }
      if (!this.#audit.claims().some((c) => c.key === key && c.node === node) || !this.#isServing(node))
        return context.count('publication-delete: its block given back, or its agent stopped, first');
      await new Promise((resolve) => setTimeout(resolve, REPUBLISH_POLL_MS));
    }
    const excuse = unwrittenExcuse({
      ranMs: owner?.runningMs?.(from, Date.now()) ?? Date.now() - from,
      stood: this.#calmSince === undefined ? 'the API server was away or in recovery' : undefined,
    });
    if (excuse !== undefined) return context.count(`publication-delete: ${excuse}`);
    // A node that stopped allocating (its store's data lost, a recovery it waits for) writes nothing.
    const problem = owner === undefined ? undefined : await this.#problemOf(owner);
    if (problem !== undefined) {
      context.log(`kubernetes: ${node} has not written the publication of ${key} again: ${problem}`);
      return context.count('publication-delete: not written again while its node stopped allocating');
    }
    this.#unexpected.push({
      key: `publication ${key}`,
      what: `${node} did not write the publication of block ${key} again within ${REPUBLISH_BOUND_MS} ms of its deletion by hand`,
    });
  }

  /** What `node`'s `warren status` says stops it (cluster.problem); undefined when nothing, or it did not answer. */
  async #problemOf(node: StoreNode): Promise<string | undefined> {
    try {
      const r = await requestJson({ socket: socketOf(node), method: 'GET', path: '/v1/status', timeoutMs: 5_000 });
      return (r.body as { cluster?: { problem?: string } }).cluster?.problem;
    } catch {
      return undefined;
    }
  }

  /**
   * The API server taken away. Its listener's close waits for every connection to end, and a TLS
   * connection still in its handshake when the others are cut is not among them: it is then served
   * as usual (keep-alive 90 s, a watch for ever), and the close never ends. Cutting the
   * connections until the close ends is what a restarting apiserver does to them anyway.
   */
  async #takeAway(how: '503' | 'refuse'): Promise<void> {
    let closed = false;
    const away = this.#api.setUnavailable(true, how).finally(() => (closed = true));
    while (!closed) {
      await Promise.race([away, new Promise((resolve) => setTimeout(resolve, CUT_EVERY_MS))]);
      if (!closed) this.#api.cutConnections();
    }
    await away;
  }

  /** Whether `node`'s agent was started and its socket answers (judged by its last status). */
  #isServing(node: string): boolean {
    return [...this.#nodes.values()].some((n) => n.name === node && this.#lastStatus.get(n.index) === 'up');
  }

  readonly #lastStatus = new Map<number, 'up' | 'down'>();
  /** Each node's problem at the operator's last look (a change is logged: what the operator judged). */
  readonly #lastProblem = new Map<number, string | undefined>();

  /**
   * One round of the operator: each node's status; `warren store accept` where the procedure says.
   * On every node at once, as an operator's script runs `kubectl exec` on each pod (one after
   * another, before: a sixth of a plan's time was the recoveries' CLI calls).
   */
  async #operate(): Promise<void> {
    this.#announcedLeft = 0;
    this.#haltedLeft = 0;
    await Promise.all([...this.#nodes.values()].map((node) => this.#operateOn(node)));
  }

  async #operateOn(node: StoreNode): Promise<void> {
    let problem: string | undefined;
    let announced = 0;
    try {
      const r = await requestJson({ socket: socketOf(node), method: 'GET', path: '/v1/status', timeoutMs: 5_000 });
      const cluster = (r.body as { cluster?: { problem?: string; fileCheck?: { announced?: number } } }).cluster;
      problem = cluster?.problem;
      announced = cluster?.fileCheck?.announced ?? 0;
      this.#lastStatus.set(node.index, 'up');
    } catch {
      this.#lastStatus.set(node.index, 'down');
      return;
    }
    const verdict = judgeProblem(node.name, problem);
    if (this.#lastProblem.get(node.index) !== problem)
      this.#context?.log(`kubernetes operator: ${node.name} ${verdict}: ${problem ?? 'no problem'}`);
    this.#lastProblem.set(node.index, problem);
    if (this.#accepting && (await this.#forgetWaitedFor(node, problem))) return;
    if (verdict === 'serving' && announced > 0 && this.#announcedUnheld(node)) {
      if (!(await this.#accept(node, 'store accept of announced addresses held (docs/recovery.md)')))
        this.#announcedLeft += 1;
      return;
    }
    if (verdict !== 'serving') this.#haltedLeft += 1;
    if (verdict === 'serving' || verdict === 'waiting') return;
    if (this.#losses === 0 || verdict === 'other') {
      this.#unexpected.push({
        key: `halt ${node.name} ${problem}`,
        what: `${node.name} stopped allocating with ${this.#losses === 0 ? 'no restore of the API server, nor a Lease deleted, behind it' : 'another reason than a loss'}: ${problem}`,
      });
      return;
    }
    if (!this.#accepting) return;
    await this.#accept(node, 'store accept (docs/recovery.md)');
  }

  /**
   * docs/recovery.md: the recovery waits for every node listed to accept the store or be forgotten
   * with `warren node forget`. A node lost for good (its Node deleted: `lostNodes`) never accepts,
   * and its Node's deletion does not take it off the list (reported), so the operator forgets it on
   * `node`'s agent. Whether a node listed was forgotten so (the others are left to the accepts).
   */
  async #forgetWaitedFor(node: StoreNode, problem: string | undefined): Promise<boolean> {
    const waiting = /is in recovery since .*waiting for (.*)$/.exec(problem ?? '');
    const lost = (waiting?.[1] ?? '').split(', ').filter((name) => this.#forgotten.has(name));
    for (const name of lost) {
      const out = await run(process.execPath, [WARREN_BIN, 'node', 'forget', name, '--socket', socketOf(node)], {
        env: { ...process.env, PATH: CHILD_PATH },
      });
      const done = out.code === 0;
      this.#context?.count(
        done ? 'warren node forget of a lost node the recovery waits for' : 'warren node forget refused (tried again)',
      );
      if (!done) this.#context?.log(`${node.name}: warren node forget ${name}: ${out.stdout}${out.stderr}`);
    }
    return lost.length > 0;
  }

  /** Whether the accept was made. */
  #accept(node: StoreNode, what: string): Promise<boolean> {
    return storeAccept(node, this.#context, what);
  }

  /** Nodes whose announced placeholders the last round could not accept yet. */
  #announcedLeft = 0;

  /** Nodes the last round found stopped (a recovery under way, or another reason). */
  #haltedLeft = 0;

  /**
   * The end: the operator's rounds until no node is stopped and no announced placeholder is left to
   * accept (bounded). A prefix of a plan (`--steps`) may end mid-fault where the whole plan never does
   * (store-kube-plan.ts): the API server stopped, or a loss not recovered yet (kubernetes seed 3839,
   * 8,000 steps: a Lease deleted at step 7998, the new file's placeholders never accepted). Both are
   * ended first, as the plan's own steps would.
   */
  async settle(): Promise<void> {
    const context = this.#context;
    if (context !== undefined && !this.#up) await this.runStep(closing('api-start'), context);
    if (context !== undefined && this.#losses > 0 && !this.#accepting)
      await this.runStep(closing('api-recover'), context);
    const until = Date.now() + SETTLE_BOUND_MS;
    do {
      this.#operating = this.#operating.then(() => this.#operate()).catch(() => {});
      await this.#operating;
      if (this.#announcedLeft === 0 && this.#haltedLeft === 0) return;
      await new Promise((resolve) => setTimeout(resolve, OPERATOR_MS));
    } while (Date.now() < until);
  }

  /** Whether `node`'s announced placeholders may be accepted (announced-placeholders.ts). */
  #announcedUnheld(node: StoreNode): boolean {
    return this.#truth !== undefined && placeholdersOf(node, this.#truth) !== 'held';
  }

  /** The workload's truth, as the auditor's first look hands it over. */
  #truth: GroundTruth | undefined;

  async heldOutsideFile(node: StoreNode): Promise<ReadonlySet<string>> {
    return this.#audit.publishedContainers(node.name);
  }

  async auditCluster(truth: GroundTruth): Promise<ReadonlyArray<{ key: string; what: string }>> {
    this.#truth = truth;
    const found = [...this.#unexpected, ...this.#audit.look(truth, this.#calmSince)];
    this.#unexpected.length = 0;
    return found;
  }

  async close(): Promise<void> {
    clearInterval(this.#operator);
    await this.#operating.catch(() => {});
    await this.#api.stop();
  }
}

/**
 * What a node's `cluster.problem` says, for the procedure: it allocates (none, or a passing state:
 * not announced yet, the marker not read yet, an accept under way); it waits for other nodes to
 * accept; it must accept (it stopped because the store went back, or the marker lists it); or it
 * stopped for another reason.
 */
export function judgeProblem(node: string, problem: string | undefined): 'serving' | 'waiting' | 'accept' | 'other' {
  if (problem === undefined) return 'serving';
  const waiting = /is in recovery since .*waiting for (.*)$/.exec(problem);
  if (waiting !== null) return (waiting[1] ?? '').split(', ').includes(node) ? 'accept' : 'waiting';
  // Passing states first: "the recovery marker has not been read yet (another node may have found
  // the store lost its data)" names the loss without being one.
  if (/not announced|has not been read yet|is accepting the cluster store/.test(problem)) return 'serving';
  if (STORE_WENT_BACK.test(problem)) return 'accept';
  return 'other';
}

/** A recovery step the run's end takes where a prefix of the plan stopped before it (`settle`). */
function closing(action: KubeAction): StoreStep {
  return { kind: 'store', action, fault: false };
}

function nodeName(index: number): string {
  return `soak-node-${index}`;
}

function socketOf(node: StoreNode): string {
  return join(node.stateDir, 'warren.sock');
}

export const kubernetesBackend: StoreBackend = {
  name: 'kubernetes',
  plan: kubePlan,
  forgetsNodes: true,
  open: async (nodes) => new KubeSoakStore(await startFakeKubeApi({ crds: 'deploy' }), nodes),
};
