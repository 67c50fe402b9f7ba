/**
 * One soak run on a store (store.ts; SQLite unless said): the store's own processes, N real
 * agents as N nodes, the real plugin executable, the plan of a seed (plan.ts) carried out step by
 * step (the store's own steps run by its backend), and the auditor (auditor.ts) looking after every
 * step and every POLL_MS between them, and at the cluster's objects every CLUSTER_AUDIT_MS. The runtime it plays is kubelet's:
 * operations on one pod run one after another, on different pods at once (up to `inFlight`); a
 * failed ADD is followed by the DEL of its sandbox and its netns removed (the runtime's cleanup);
 * a DEL that fails is retried; a pod deleted is DELed, then its netns removed; a pod re-created
 * (a StatefulSet replica) is deleted so, then made again under its name with a new UID and sandbox.
 * A node lost (its machine dead: agent killed, every netns gone, no DEL) keeps its sandboxes live,
 * their addresses held, until the store's operator forgets it; from then they are gone by `forget`
 * and judged released when the cluster no longer holds them for the node (its claims freed, its
 * publications withdrawn: `watchForgotten`); the node comes back with an empty state directory.
 *
 * Every process started is killed by PID and every directory and mount removed in `finally`, also
 * when a step throws. Every wait is bounded: a step's own helpers bound theirs (HANG_BOUND_MS), and
 * the end waits for the last releases at most `settleMs` (polling the files, as the latency
 * measurement does).
 */
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { cniBinDir } from '../helpers/cni.ts';
import { Auditor, type ExplanationFigures, type LatencyFigures, type Violation, readRecords } from './auditor.ts';
import { GroundTruth, type Sandbox } from './ground-truth.ts';
import { cidrContains } from './kube-cluster-audit.ts';
import { type Step, describeStep, faultName, isFault, isOperation } from './plan.ts';
import { type ReleaseSettings, SoakNode } from './soak-node.ts';
import type { LostNodes, SoakStore, StoreBackend } from './store.ts';
import { sqliteBackend } from './store-sqlite.ts';

export interface SoakOptions {
  readonly seed: number;
  readonly steps: readonly Step[];
  readonly nodes: number;
  readonly settings: ReleaseSettings;
  /** Operations in flight at once, at most. */
  readonly inFlight: number;
  /** The release bound the auditor holds every proven-gone sandbox to (ms). */
  readonly boundMs: number;
  /** How long the end waits for the last releases before it reports them unreleased (ms). */
  readonly settleMs: number;
  /** The store the agents run on (default SQLite, each node its own). */
  readonly store?: StoreBackend;
  readonly log?: (line: string) => void;
  /** Told each step as it begins (`--trace`): where a run that hangs stands. */
  readonly trace?: (line: string) => void;
  /** Told every PROGRESS_STEPS steps how far the run is (a long run's only sign of life). */
  readonly progress?: (line: string) => void;
  /**
   * Aborted: no step begins after the one running (Ctrl-C, SIGTERM); the run ends as a prefix of
   * the plan does (`--steps`), every node started, the last releases awaited, the verdict on the
   * steps run.
   */
  readonly stop?: AbortSignal;
}

export interface SoakReport {
  readonly seed: number;
  readonly stepsRun: number;
  readonly faults: Readonly<Record<string, number>>;
  readonly operations: Readonly<Record<string, number>>;
  readonly violations: readonly Violation[];
  readonly latencies: readonly LatencyFigures[];
  /** How the releases observed were explained, and the agents' release counters at the end. */
  readonly explanations: ExplanationFigures;
  /** The auditor's looks at the nodes' files, and how many could not read one. */
  readonly looks: { readonly total: number; readonly unreadable: number };
  readonly durationMs: number;
}

const POLL_MS = 100;
/** How often the cluster's objects are audited (a cluster store's; a look is several API reads). */
const CLUSTER_AUDIT_MS = 1_000;
const DEL_TRIES = 5;
const PROGRESS_STEPS = 1_000;
/** How long past the release bound a lost node's return waits for its forget to be done (ms). */
const RETURN_WAIT_MS = 20_000;

export async function runSoak(o: SoakOptions): Promise<SoakReport> {
  cniBinDir(); // builds and installs the plugin once, before the clock starts
  const began = Date.now();
  const truth = new GroundTruth();
  const nodes: SoakNode[] = [];
  const counts = { faults: {} as Record<string, number>, operations: {} as Record<string, number> };
  const count = (table: Record<string, number>, key: string) => (table[key] = (table[key] ?? 0) + 1);
  let auditor: Auditor | undefined;
  let poller: NodeJS.Timeout | undefined;
  const inFlight = new Set<Promise<void>>();
  const podChains = new Map<number, Promise<void>>();
  let stepsRun = 0;
  let store: SoakStore | undefined;
  /** The cluster audit runs between store faults only; this holds the one running. */
  let clusterAudit: Promise<void> = Promise.resolve();
  let clusterAuditAt = 0;
  /** The watches of a forgotten node's releases (`watchForgotten`), ended with the run. */
  const forgetWatches = new Set<Promise<void>>();
  /** The watch of each forgotten node's releases, by node: its return waits for it (bounded). */
  const forgetWatchOf = new Map<number, Promise<void>>();
  let watching = true;
  try {
    store = await (o.store ?? sqliteBackend).open(o.nodes);
    const theStore = store;
    for (let i = 0; i < o.nodes; i++) nodes.push(new SoakNode(i, store, o.settings));
    await Promise.all(nodes.map((n) => n.start()));
    const audit = new Auditor(nodes, truth, o.boundMs, { sharedRange: store.sharedRange });
    auditor = audit;
    poller = setInterval(() => audit.check(), POLL_MS);
    const auditCluster = async (): Promise<void> => {
      await clusterAudit;
      clusterAuditAt = Date.now();
      clusterAudit = theStore.auditCluster(truth).then(
        (found) => {
          for (const v of found) audit.report(v.key, v.what);
        },
        (error: Error) => o.log?.(`cluster audit: could not look (${error.message})`),
      );
      await clusterAudit;
    };
    const nodeOf = (s: Sandbox) => nodes[s.node] as SoakNode;

    /** DEL until it succeeds (a runtime retries it); journaled or answered, it proves the sandbox gone. */
    const del = async (s: Sandbox): Promise<void> => {
      const node = nodeOf(s);
      const incarnation = node.incarnation;
      const wasUp = node.isUp;
      // Gone from the moment its DEL is sent: the agent may release it before the answer arrives.
      truth.markGone(s, 'del', Date.now());
      let reply: Awaited<ReturnType<SoakNode['cni']>> | undefined;
      for (let attempt = 1; attempt <= DEL_TRIES; attempt++) {
        reply = await node.cni('DEL', s.id, s.pod, s.uid);
        if (reply.code === 0) break;
        if (node.diskFull) {
          // A full disk fails a DEL (the agent cannot commit, the plugin cannot journal): nothing is
          // proven yet, and the runtime sends it again once the disk has room (its netns stays).
          truth.markDeleting(s);
          node.retryWhenFreed(() => del(s));
          return;
        }
      }
      if (reply?.code !== 0) audit.lost(`DEL ${s.id} on ${node.name}: ${reply?.stdout}${reply?.stderr}`);
      // Answered by the agent that ran when it was sent, or else journaled (the agent was down, or died meanwhile).
      const answered = wasUp && node.incarnation === incarnation;
      if (!answered) s.source = 'journal';
      node.removeNetns(s.id);
    };

    const add = async (pod: number, nodeIndex: number): Promise<void> => {
      const s = truth.newSandbox(pod, nodeIndex);
      const node = nodeOf(s);
      node.createNetns(s.id);
      const incarnation = node.incarnation;
      const wasUp = node.isUp;
      const reply = await node.cni('ADD', s.id, pod, s.uid);
      const ips = (reply.json?.ips ?? []) as Array<{ address?: string }>;
      const address = ips[0]?.address?.split('/')[0];
      if (reply.code === 0 && address !== undefined) {
        truth.markLive(s, address);
        count(counts.operations, 'ADD answered an address');
        return;
      }
      const ran =
        wasUp && node.incarnation === incarnation ? 'its agent running throughout' : 'its agent down or killed';
      if (typeof reply.json?.code === 'number')
        count(counts.operations, `ADD answered CNI error ${reply.json.code} (${ran})`);
      else
        audit.lost(
          `ADD ${s.id} on ${node.name} answered neither an address nor a CNI error: ${reply.stdout}${reply.stderr}`,
        );
      await del(s); // the runtime's cleanup of a failed ADD
    };

    const forceGone = (s: Sandbox | undefined): void => {
      if (s?.state !== 'live') return;
      truth.markGone(s, 'netns', Date.now());
      nodeOf(s).removeNetns(s.id);
    };

    const operation = async (step: Step): Promise<void> => {
      switch (step.kind) {
        case 'create':
          theStore.pods?.created(step.pod, (nodes[step.node] as SoakNode).name, truth.podUid(step.pod));
          return add(step.pod, step.node);
        case 'delete': {
          const s = truth.current(step.pod);
          if (s?.state === 'live') await del(s);
          theStore.pods?.deleted(step.pod);
          return;
        }
        case 'force-delete':
          forceGone(truth.current(step.pod));
          theStore.pods?.deleted(step.pod);
          return;
        case 'crash-loop': {
          const s = truth.current(step.pod);
          if (s === undefined) return;
          forceGone(s);
          return add(step.pod, s.node);
        }
        case 'recreate': {
          // The StatefulSet's replica: the old pod deleted (its sandbox DELed, or force-deleted and
          // never DELed), then a pod of the same name, a new UID, a new sandbox, on the node drawn.
          const s = truth.current(step.pod);
          if (step.forced) forceGone(s);
          else if (s?.state === 'live') await del(s);
          theStore.pods?.deleted(step.pod);
          const uid = truth.recreated(step.pod);
          theStore.pods?.created(step.pod, (nodes[step.node] as SoakNode).name, uid);
          return add(step.pod, step.node);
        }
        default:
          throw new Error(`not an operation: ${describeStep(step)}`);
      }
    };

    /**
     * An agent that died by itself is a violation (with its log's end); the run starts it again,
     * as its DaemonSet or systemd unit would, so the releases it owes are still measured.
     */
    const crashesSeen = new Map<number, number>();
    const restartCrashed = async (): Promise<void> => {
      for (const node of nodes) {
        const seen = crashesSeen.get(node.index) ?? 0;
        if (node.crashes.length === seen) continue;
        crashesSeen.set(node.index, node.crashes.length);
        for (const crash of node.crashes.slice(seen)) {
          audit.report(
            `crash ${node.index} ${crash.at}`,
            `${node.name}: the agent exited by itself (${crash.what}); its log's end:\n${crash.log}`,
          );
          count(counts.faults, 'agent exited by itself (a defect), started again');
        }
        if (node.wanted && !node.isUp) await node.start();
      }
    };

    /** An operation in flight: settled before a state is put back and at the end. */
    const track = (run: Promise<void>): void => {
      const tracked: Promise<void> = run.finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
    };

    const settle = async (): Promise<void> => {
      await Promise.all([...inFlight]);
    };

    /**
     * Before its state is put back (or deleted: `wipe`, a copy that holds nothing): the node's calls
     * in flight end (its agent is dead), then the truth follows the file, and what the store keeps
     * outside it (a cluster store's published allocations, written back at the agent's start:
     * docs/recovery.md).
     */
    const restore = async (node: SoakNode, wipe = false): Promise<void> => {
      await settle();
      const outside = await theStore.heldOutsideFile(node);
      if (wipe) node.wipeState();
      else node.restoreState();
      const copy = wipe ? new Map<string, string>() : readRecords(node.database);
      if (copy === undefined) throw new Error(`${node.name}: the restored file cannot be read`);
      for (const s of truth.followPutBack(node.index, new Set(copy.keys()), outside, Date.now()))
        node.removeNetns(s.id);
    };

    const lostOutsideFiles = (kept: (node: SoakNode) => ReadonlySet<string>): void => {
      const now = Date.now();
      for (const node of nodes) {
        const file = readRecords(node.database) ?? new Map<string, string>();
        const still = kept(node);
        for (const s of truth.on(node.index)) {
          if (s.returning !== true || file.has(s.id) || still.has(s.id)) continue;
          if (s.state !== 'gone' && s.state !== 'live') continue;
          const live = s.state === 'live';
          truth.nothingLeft(s, now); // never written back: nothing of it is left to release
          if (!live) continue;
          node.removeNetns(s.id); // live: its runtime tears it down
          count(counts.faults, 'sandbox lost with its file and the store (torn down)');
        }
      }
    };

    const lostNodesOf = (): LostNodes => {
      if (theStore.lostNodes === undefined) throw new Error('a node lost on a store that forgets no node');
      return theStore.lostNodes;
    };

    /** The machine died: its agent killed, its calls ended, every netns of it gone (no DEL). */
    const loseNode = async (node: SoakNode): Promise<void> => {
      await node.kill();
      await settle();
      for (const s of truth.on(node.index)) node.removeNetns(s.id);
    };

    /**
     * The operator forgets the lost node: its pods' objects deleted (the pod GC's, its Node gone),
     * the store's forget; every sandbox it still held is gone by `forget` from then.
     */
    const forgetNode = async (lost: SoakNode, from: SoakNode): Promise<void> => {
      for (const s of truth.on(lost.index)) if (truth.current(s.pod) === s) theStore.pods?.deleted(s.pod);
      const at = await lostNodesOf().forget(lost, from, storeContext);
      const owed = truth
        .on(lost.index)
        .filter(
          (s) => s.state === 'live' || s.state === 'deleting' || (s.state === 'gone' && s.releasedAt === undefined),
        );
      for (const s of owed) truth.markGone(s, 'forget', at);
      const watch: Promise<void> = watchForgotten(lost, owed).finally(() => forgetWatches.delete(watch));
      forgetWatches.add(watch);
      forgetWatchOf.set(lost.index, watch);
    };

    /** Polls the cluster until it holds none of `owed` for the lost node (or the run ends). */
    const watchForgotten = async (lost: SoakNode, owed: Sandbox[]): Promise<void> => {
      let pending = owed;
      while (pending.length > 0 && watching) {
        const held = await lostNodesOf()
          .held(lost)
          .catch(() => undefined);
        const now = Date.now();
        if (held !== undefined)
          for (const s of pending) {
            if (s.source !== 'forget') continue; // its node back before the forget was acted on: `takenBack`
            const inBlock =
              s.address !== undefined && held.blocks.some((cidr) => cidrContains(cidr, s.address as string));
            if (!inBlock && !held.containers.has(s.id)) s.releasedAt = now;
          }
        pending = pending.filter((s) => s.releasedAt === undefined && s.source === 'forget');
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    };

    /**
     * The lost node back as a new machine of its name: its state directory empty, its agent started.
     * A new machine is brought up once the old one is forgotten (the cluster freed what it held, or
     * RETURN_WAIT_MS passed: then the auditor reports the releases late or missing), at once while
     * the store is away (no agent can act on the forget before a later step brings it back): a
     * machine back before any agent acted on its forget (a Node deleted and registered again within
     * the Lease's lapse) is not forgotten at all, and its blocks stay its own.
     */
    const returnNode = async (node: SoakNode): Promise<void> => {
      const forgotten = forgetWatchOf.get(node.index);
      forgetWatchOf.delete(node.index);
      if (forgotten !== undefined && !lostNodesOf().away()) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          forgotten,
          new Promise((resolve) => (timer = setTimeout(resolve, o.boundMs + RETURN_WAIT_MS))),
        ]);
        clearTimeout(timer);
      }
      node.busy = true;
      try {
        for (const entry of readdirSync(node.stateDir))
          rmSync(join(node.stateDir, entry), { recursive: true, force: true });
      } finally {
        node.busy = false;
      }
      if (lostNodesOf().returned(node)) await takenBack(node);
      await node.start();
    };

    /**
     * The lost node back before any agent could act on its forget (the cluster away meanwhile): its
     * blocks stay its own, so its sandboxes still owed a release are judged in its new file, from
     * now: what its publications name is written back there at its agent's start and released by its
     * proof (the netns gone); what they do not name (announced at most) is a placeholder until the
     * operator's accept (docs/recovery.md), its container unnamed (found by the soak, kubernetes
     * seed 3839 step 6180: judged in the cluster, they stayed held in the node's blocks to the end).
     */
    const takenBack = async (node: SoakNode): Promise<void> => {
      const published = await theStore.heldOutsideFile(node);
      const now = Date.now();
      for (const s of truth.on(node.index)) {
        if (s.state !== 'gone' || s.source !== 'forget' || s.releasedAt !== undefined) continue;
        if (published.has(s.id)) {
          truth.markGone(s, 'restored', now);
          s.returning = true;
        } else truth.nothingLeft(s, now);
      }
    };

    // Provable from now: the store was recovered, or back after an outage that began at `awayFrom`.
    const recovering = (awayFrom?: number): void =>
      truth.forgetsProvableFrom(Date.now(), awayFrom === undefined ? undefined : awayFrom - o.boundMs);

    const storeContext = {
      nodes,
      count: (what: string) => count(counts.faults, what),
      lostOutsideFiles,
      recovering,
      log: (line: string) => o.log?.(line),
    };

    const fault = async (step: Step): Promise<void> => {
      if (step.kind === 'store') {
        await clusterAudit; // never a look at the cluster during its fault
        return theStore.runStep(step, storeContext);
      }
      if (isOperation(step)) throw new Error(`not a fault: ${describeStep(step)}`);
      const node = nodes[step.node] as SoakNode;
      switch (step.kind) {
        case 'kill':
          // A seeded moment, not a wait for an event: the fault lands wherever the calls then are.
          await new Promise((resolve) => setTimeout(resolve, step.afterMs));
          if (node.callsInFlight > 0) count(counts.faults, 'kill with its CNI calls in flight');
          return node.kill();
        case 'start':
          return node.start();
        case 'restart':
          await node.stop();
          return node.start();
        case 'copy-state':
          node.copyState();
          return;
        case 'restore-state':
          return restore(node);
        case 'wipe-state':
          return restore(node, true); // as a restore from a copy that holds nothing
        case 'clock-step':
          node.clock.step(step.seconds);
          return;
        case 'disk-full':
          node.fillDisk();
          return;
        case 'disk-freed':
          // The DELs that failed meanwhile go again at once, whatever else is in flight.
          for (const again of node.freeDisk()) track(again());
          return;
        case 'node-lost':
          return loseNode(node);
        case 'node-forget':
          return forgetNode(node, nodes[step.from] as SoakNode);
        case 'node-return':
          return returnNode(node);
        default: {
          const never: never = step;
          throw new Error(`unknown step ${String(never)}`);
        }
      }
    };

    for (const [i, step] of o.steps.entries()) {
      if (o.stop?.aborted === true) break;
      audit.step = i;
      o.trace?.(`${new Date().toISOString()} step ${i}: ${describeStep(step)} (${inFlight.size} in flight)`);
      if (isOperation(step)) {
        count(counts.operations, step.kind);
        while (inFlight.size >= o.inFlight) await Promise.race(inFlight);
        const pod = step.pod;
        const run = (podChains.get(pod) ?? Promise.resolve()).then(() => operation(step));
        podChains.set(pod, run);
        track(run);
      } else {
        if (isFault(step)) count(counts.faults, faultName(step));
        await fault(step);
      }
      stepsRun = i + 1;
      if (stepsRun % PROGRESS_STEPS === 0)
        o.progress?.(
          `# step ${stepsRun} of ${o.steps.length}, ${Math.round((Date.now() - began) / 1000)} s, ` +
            `${audit.violations.length} violations so far`,
        );
      await restartCrashed();
      audit.check();
      if (Date.now() - clusterAuditAt >= CLUSTER_AUDIT_MS) await auditCluster();
    }
    await settle();
    audit.step = stepsRun;
    for (const node of nodes) await node.start();
    await theStore.settle?.();
    // The last releases: polled with a deadline (the netns sweep runs on its interval).
    const end = Date.now() + o.settleMs;
    while (Date.now() < end) {
      audit.check();
      if (audit.unreleased().length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    watching = false;
    await Promise.all([...forgetWatches]);
    audit.check();
    await auditCluster();
    audit.final();
    await audit.agentsAtEnd();
    for (const node of nodes)
      for (let i = 0; i < node.startsRefused; i++)
        count(counts.faults, 'agent start refused (its name still announced), restarted');
    if (audit.violations.length > 0)
      for (const node of nodes) o.log?.(`--- ${node.name}'s last agent log (end) ---\n${node.log().slice(-4_000)}`);
  } finally {
    if (poller !== undefined) clearInterval(poller);
    watching = false;
    await Promise.allSettled([...forgetWatches]);
    await Promise.allSettled([...inFlight]);
    for (const node of nodes) await node.close();
    await clusterAudit.catch(() => {});
    await store?.close();
  }
  const a = auditor as Auditor;
  return {
    seed: o.seed,
    stepsRun,
    faults: counts.faults,
    operations: counts.operations,
    violations: a.violations,
    latencies: a.latencies(),
    explanations: a.explanations(),
    looks: { total: a.looks, unreadable: a.unreadable },
    durationMs: Date.now() - began,
  };
}
