/**
 * The soak's plan: the sequence of workload operations and faults, a pure function of the seed.
 * The plan is drawn before anything runs, against a model of what the harness intends (which pods
 * it started on which node, which agents it stopped, which state copies it took), never against
 * what happened, so one seed always gives the same steps and a prefix of a plan is the plan of a
 * shorter run (`--steps K` replays the first K steps; shrinking halves K). What real processes do
 * with the steps (which ADD an agent's death catches mid-flight) varies with timing.
 *
 * Guarantees of every plan: a node stopped by a fault is started again within a few steps (but a
 * node lost: it is forgotten a few steps after its loss, never started before, and comes back as a
 * new machine, its state directory empty, a few steps after its forget), and its state directory is
 * copied or put back only while it is stopped; a restore puts back the newest copy of that node's
 * directory; the plan ends with every node's start planned (every node lost forgotten and back). The store's
 * own faults (store.ts: a cluster store's API server stopped, restored, ...) are drawn by its
 * planner from the same generator, a share of the faults; a store without faults of its own draws
 * nothing, so its plans are the ones drawn before the store seam. The nodes' faults beyond their
 * agents' deaths (a wall clock stepped, a disk full for a few steps and then freed) are drawn only
 * when asked for, for the same reason; a full disk is freed before its node is killed or restarted.
 * So are the workload's extra kinds (`workload`): StatefulSet re-creation (a pod deleted, DELed or
 * not, and a pod of the same name and namespace made again with a new UID and a new sandbox, on its
 * node or another), and a node lost and forgotten (its agent killed, its pods gone with it and no
 * DEL, then forgotten by the store's operator, then back with an empty state directory: only on a
 * store that forgets nodes, one node at a time, never the last node up; no operation nor fault
 * befalls a lost node, and its pods are no longer the plan's).
 */
import { SeededRandom } from '../helpers/random.ts';
import type { StorePlan, StoreStep } from './store.ts';

/** Pods are numbered from 0 in the order the plan creates them; a pod lives on one node. */
export type Step =
  /** A new pod: its first sandbox is ADDed (CNI_CONTAINERID new, its own netns file). */
  | { readonly kind: 'create'; readonly node: number; readonly pod: number }
  /** The pod deleted: DEL of its sandbox, then its netns removed (the runtime's teardown). */
  | { readonly kind: 'delete'; readonly pod: number }
  /** The pod force-deleted: its netns removed, and no DEL ever sent. */
  | { readonly kind: 'force-delete'; readonly pod: number }
  /** The pod's sandbox crashed: its netns gone with no DEL, and a new sandbox (new container ID) ADDed. */
  | { readonly kind: 'crash-loop'; readonly pod: number }
  /**
   * StatefulSet re-creation: the pod deleted (its DEL sent, or `forced`: its netns removed, no DEL)
   * and the pod of the same name and namespace made again, a new pod UID and a new sandbox, on `node`.
   */
  | { readonly kind: 'recreate'; readonly pod: number; readonly node: number; readonly forced: boolean }
  /** The node's machine died: its agent killed -9, every netns of it gone, no DEL; nothing started on it. */
  | { readonly kind: 'node-lost'; readonly node: number }
  /** The operator forgets the lost node (the store's way: store.ts `forgetNode`), from node `from` when it asks one. */
  | { readonly kind: 'node-forget'; readonly node: number; readonly from: number }
  /** The lost node back as a new machine of the same name: its state directory empty, its agent started. */
  | { readonly kind: 'node-return'; readonly node: number }
  /**
   * kill -9 of the node's agent `afterMs` after the step is reached, whatever it is doing: the
   * calls of the steps just before are then on their way (ADDs in flight, mid-commit, mid-reply).
   */
  | { readonly kind: 'kill'; readonly node: number; readonly afterMs: number }
  /** The stopped agent started again on its state directory. */
  | { readonly kind: 'start'; readonly node: number }
  /** SIGTERM, wait for the exit, start again. */
  | { readonly kind: 'restart'; readonly node: number }
  /** While the agent is stopped: a copy of its state directory (database, WAL, journal). */
  | { readonly kind: 'copy-state'; readonly node: number }
  /** While the agent is stopped: its state directory replaced by its newest copy. */
  | { readonly kind: 'restore-state'; readonly node: number }
  /** While the agent is stopped: its state directory deleted (a disk lost or replaced, the machine kept). */
  | { readonly kind: 'wipe-state'; readonly node: number }
  /** NTP stepped the node's wall clock by `seconds` (back when negative), its processes running. */
  | { readonly kind: 'clock-step'; readonly node: number; readonly seconds: number }
  /** The node's disk full: its agent's next write (a commit, a journal entry) fails with ENOSPC. */
  | { readonly kind: 'disk-full'; readonly node: number }
  /** The node's disk has room again. */
  | { readonly kind: 'disk-freed'; readonly node: number }
  /** One of the store's own steps (its backend's to run). */
  | StoreStep;

export type StepKind = Step['kind'];

/** A kill fires this long after its step at most: the ADDs just sent are then in flight (a plugin call takes ~10-50 ms). */
const KILL_WITHIN_MS = 60;

/** The steps that are faults (the rest are the workload). */
export const FAULT_KINDS: ReadonlySet<StepKind> = new Set([
  'kill',
  'restart',
  'restore-state',
  'wipe-state',
  'clock-step',
  'disk-full',
  'node-lost',
]);

/** The workload's operations (one pod each; the rest are faults and recoveries). */
export const OPERATION_KINDS: ReadonlySet<StepKind> = new Set([
  'create',
  'delete',
  'force-delete',
  'crash-loop',
  'recreate',
]);

/** Whether a step is one of the workload's operations on a pod. */
export function isOperation(step: Step): step is Extract<Step, { readonly pod: number }> {
  return OPERATION_KINDS.has(step.kind);
}

/** The workload's kinds beyond create, delete, force-delete and crash loops, each drawn only when asked for. */
export type WorkloadExtra = 'recreate' | 'node-lost';
export const WORKLOAD_EXTRAS: readonly WorkloadExtra[] = ['recreate', 'node-lost'];
/** A re-creation's weight among the operations (create 5, delete 2.5, force-delete 1.5, crash loop 1). */
const RECREATE_WEIGHT = 1;
/** The share of the nodes' faults that lose a node, when asked for (and no node is lost). */
const NODE_LOST_SHARE = 0.06;

/**
 * The nodes' faults beyond their agents' deaths, each drawn only when asked for (so older plans stay
 * as drawn): a wall clock stepped, a disk full, a state directory deleted (`wipe`: drawn among the
 * kills, with a restart and a restore from a copy, where a zero weight leaves the draw as it was).
 */
export type NodeFault = 'clock' | 'disk' | 'wipe';
export const NODE_FAULTS: readonly NodeFault[] = ['clock', 'disk', 'wipe'];
/** A state directory deleted, among a node's kills (5), restarts (2) and restores (2), when asked for. */
const WIPE_WEIGHT = 1;
/** The share of node faults that are these, when asked for. */
const NODE_FAULT_SHARE = 0.2;
/** Wall-clock steps NTP makes (seconds); a node's clock is kept within a day of the real one. */
const CLOCK_STEPS = [-3600, -600, 600, 3600, -86_400, 86_400];
const MAX_CLOCK_OFFSET = 86_400;

/** Whether a step is a fault: a node's (FAULT_KINDS) or the store's own. */
export function isFault(step: Step): boolean {
  return step.kind === 'store' ? step.fault : FAULT_KINDS.has(step.kind);
}

/** A fault's name in the report's faults table: the node's step kind, or the store's action. */
export function faultName(step: Step): string {
  return step.kind === 'store' ? step.action : step.kind;
}

export interface PlanOptions {
  readonly seed: number;
  readonly nodes: number;
  /** Faults to place (kill, restart, restore); the plan ends after the last one's recovery. */
  readonly faults: number;
  /** Pods alive at once per node, at most (the range must hold them, with room for churn). */
  readonly podsPerNode: number;
  /** Workload steps between two faults, on average. */
  readonly operationsPerFault: number;
  /** The store's own faults; absent: only the nodes' faults. */
  readonly store?: StorePlan;
  /** Node faults beyond kills, restarts and restores (NODE_FAULTS); absent or empty: none. */
  readonly nodeFaults?: readonly NodeFault[];
  /**
   * The workload's extra kinds (WORKLOAD_EXTRAS); absent or empty: none. `node-lost` is drawn only
   * with two nodes or more, and the harness needs a store that forgets nodes (store.ts).
   */
  readonly workload?: readonly WorkloadExtra[];
}

/** The steps of one seed. */
export function planSoak(o: PlanOptions): Step[] {
  const random = new SeededRandom(o.seed);
  const steps: Step[] = [];
  /** Pods the plan believes running, per node. */
  const running: number[][] = Array.from({ length: o.nodes }, () => []);
  const down = new Set<number>();
  const copied = new Set<number>();
  let pods = 0;
  let faults = 0;
  /** Steps left before a stopped node is started (per node). */
  const downFor = new Map<number, number>();
  const storePlanner = o.store?.planner();
  const nodeFaults = (o.nodeFaults ?? []).filter((f) => f !== 'wipe'); // the faults drawn apart from the kills
  const wipes = o.nodeFaults?.includes('wipe') === true;
  /** Each node's wall-clock offset as the plan stepped it (seconds). */
  const offsets = new Map<number, number>();
  /** Steps left before a full disk is freed (per node). */
  const fullFor = new Map<number, number>();
  const recreates = o.workload?.includes('recreate') === true;
  const losesNodes = o.workload?.includes('node-lost') === true && o.nodes >= 2;
  /** The node lost, and the operations left before its forget, then before its return. */
  let lost: { node: number; forgetIn: number; returnIn: number; forgotten: boolean } | undefined;

  const operation = (): void => {
    // Any node, its agent up or not: a pod's call to a stopped agent is part of the workload.
    const node = random.int(0, o.nodes - 1);
    // A lost machine runs nothing (no kubelet): the draw is skipped, so an unlost plan stays as drawn.
    if (lost?.node === node) return;
    const here = running[node] as number[];
    const kind = random.weighted({
      create: here.length < o.podsPerNode ? 5 : 0,
      delete: here.length > 0 ? 2.5 : 0,
      'force-delete': here.length > 0 ? 1.5 : 0,
      'crash-loop': here.length > 0 ? 1 : 0,
      recreate: recreates && here.length > 0 ? RECREATE_WEIGHT : 0, // weight 0: never drawn, no draw changed
    });
    if (kind === 'create') {
      here.push(pods);
      steps.push({ kind, node, pod: pods++ });
      return;
    }
    const pod = random.pick(here);
    if (kind === 'recreate') {
      // Rescheduled on any node not lost with room for it, or on its own.
      const forced = random.chance(0.4);
      let to = random.int(0, o.nodes - 1);
      if (lost?.node === to || (to !== node && (running[to] as number[]).length >= o.podsPerNode)) to = node;
      here.splice(here.indexOf(pod), 1);
      (running[to] as number[]).push(pod);
      steps.push({ kind, pod, node: to, forced });
      return;
    }
    if (kind !== 'crash-loop') here.splice(here.indexOf(pod), 1);
    steps.push({ kind, pod });
  };

  /** A node lost: its pods gone with it, no fault nor operation on it until it is back. */
  const loseNode = (node: number): void => {
    faults += 1;
    steps.push({ kind: 'node-lost', node });
    running[node] = [];
    down.add(node);
    copied.delete(node); // the old machine's backups are not the new machine's
    lost = { node, forgetIn: random.int(1, 3), returnIn: random.int(1, 4), forgotten: false };
  };

  /** The lost node's forget (asked of a node up; none up: later), then its return. */
  const lostDue = (): void => {
    if (lost === undefined) return;
    if (!lost.forgotten) {
      const up = Array.from({ length: o.nodes }, (_, i) => i).filter((i) => !down.has(i));
      if (lost.forgetIn-- > 0 || up.length === 0) return;
      lost.forgotten = true;
      steps.push({ kind: 'node-forget', node: lost.node, from: random.pick(up) });
      return;
    }
    if (lost.returnIn-- > 0) return;
    steps.push({ kind: 'node-return', node: lost.node });
    down.delete(lost.node);
    lost = undefined;
  };

  const fault = (): void => {
    if (storePlanner !== undefined && random.chance(o.store?.share ?? 0)) {
      const drawn = storePlanner.fault(random);
      if (drawn.length > 0) faults += 1;
      steps.push(...drawn);
      return;
    }
    const node = random.int(0, o.nodes - 1);
    // A full disk is freed before anything else befalls its node (an agent started on it could not start).
    if (down.has(node) || fullFor.has(node)) return;
    if (losesNodes && lost === undefined && down.size < o.nodes - 1 && random.chance(NODE_LOST_SHARE)) {
      loseNode(node);
      return;
    }
    if (nodeFaults.length > 0 && random.chance(NODE_FAULT_SHARE)) {
      faults += 1;
      if (random.pick(nodeFaults) === 'disk') {
        steps.push({ kind: 'disk-full', node });
        fullFor.set(node, random.int(1, 4));
        return;
      }
      const offset = offsets.get(node) ?? 0;
      let seconds = random.pick(CLOCK_STEPS);
      if (Math.abs(offset + seconds) > MAX_CLOCK_OFFSET) seconds = -seconds;
      offsets.set(node, offset + seconds);
      steps.push({ kind: 'clock-step', node, seconds });
      return;
    }
    faults += 1;
    const kind = random.weighted({
      kill: 5,
      restart: 2,
      'restore-state': copied.has(node) ? 2 : 0,
      'wipe-state': wipes ? WIPE_WEIGHT : 0,
    });
    if (kind === 'restart') {
      steps.push({ kind, node });
      return;
    }
    steps.push({ kind: 'kill', node, afterMs: random.int(0, KILL_WITHIN_MS) });
    down.add(node);
    downFor.set(node, random.int(0, 2));
    if (kind === 'restore-state') {
      steps.push({ kind: 'restore-state', node });
      copied.delete(node);
    } else if (kind === 'wipe-state') {
      steps.push({ kind: 'wipe-state', node });
    } else if (random.chance(0.5)) {
      steps.push({ kind: 'copy-state', node });
      copied.add(node);
    }
  };

  const freeDue = (): void => {
    for (const [node, left] of fullFor) {
      if (left > 0) fullFor.set(node, left - 1);
      else {
        fullFor.delete(node);
        steps.push({ kind: 'disk-freed', node });
      }
    }
  };

  const startDue = (): void => {
    for (const [node, left] of downFor) {
      if (left > 0) {
        downFor.set(node, left - 1);
        continue;
      }
      downFor.delete(node);
      down.delete(node);
      steps.push({ kind: 'start', node });
    }
  };

  while (faults < o.faults) {
    const between = random.int(1, Math.max(1, 2 * o.operationsPerFault - 1));
    for (let i = 0; i < between; i++) {
      operation();
      freeDue();
      startDue();
      lostDue();
      if (storePlanner !== undefined) steps.push(...storePlanner.due(random));
    }
    fault();
  }
  for (const node of [...fullFor.keys()]) {
    fullFor.delete(node);
    steps.push({ kind: 'disk-freed', node });
  }
  for (const node of [...downFor.keys()]) {
    downFor.delete(node);
    steps.push({ kind: 'start', node });
  }
  // Every node is up now: the one lost is forgotten (if not yet) and back.
  const last = lost as typeof lost; // narrowed by the closures' writes only, which TypeScript cannot see
  if (last !== undefined) {
    const from = Array.from({ length: o.nodes }, (_, i) => i).find((i) => i !== last.node) as number;
    if (!last.forgotten) steps.push({ kind: 'node-forget', node: last.node, from });
    steps.push({ kind: 'node-return', node: last.node });
    lost = undefined;
  }
  if (storePlanner !== undefined) steps.push(...storePlanner.end());
  return steps;
}

/** One line per step, as a failure prints the sequence that led to it. */
export function describeStep(step: Step): string {
  switch (step.kind) {
    case 'create':
      return `create pod ${step.pod} on node ${step.node}`;
    case 'delete':
    case 'force-delete':
    case 'crash-loop':
      return `${step.kind} pod ${step.pod}`;
    case 'recreate':
      return `recreate pod ${step.pod} (${step.forced ? 'force-deleted' : 'DELed'}) on node ${step.node}, a new UID`;
    case 'node-lost':
    case 'node-return':
      return `${step.kind} node ${step.node}`;
    case 'node-forget':
      return `node-forget node ${step.node} (asked of node ${step.from})`;
    case 'kill':
      return `kill node ${step.node} ${step.afterMs} ms after the step`;
    case 'start':
    case 'restart':
    case 'copy-state':
    case 'restore-state':
    case 'wipe-state':
      return `${step.kind} node ${step.node}`;
    case 'clock-step':
      return `wall clock of node ${step.node} stepped ${step.seconds > 0 ? '+' : ''}${step.seconds} s`;
    case 'disk-full':
    case 'disk-freed':
      return `${step.kind} on node ${step.node}`;
    case 'store':
      return `store: ${step.action}${step.arg === undefined ? '' : ` ${step.arg}`}`;
    default: {
      const never: never = step;
      return String(never);
    }
  }
}
