/**
 * A node group: a share of the scale harness's simulated nodes in a process of its own
 * (`--node-processes K`), started by node-groups.ts with `fork` (an IPC channel) and driven over it
 * — each `{ id, op, args }` answered `{ id, result }` or `{ id, error }`. Its nodes are
 * simulated-node.ts's, on a ManualClock of the group's own that starts where the harness's does
 * and moves only when told (`step`), by the harness's steps, so every group's clock reads what the
 * harness's reads between steps.
 *
 * Guarantees: it says `{ ready: true }` once it listens (nothing before it); `step` answers once the
 * clock moved, its due timers fired and the group's nodes counted no new answer for QUIET_POLLS
 * polls (at most QUIET_CAP_MS: the harness's settle on the server's counts follows), so what a step
 * sets off has reached the API server by then; `close` closes every node (their Leases withdrawn),
 * answers, and the process exits; the process exits too when the harness goes (the channel closes),
 * so no group outlives its harness.
 *
 * Run by the harness only: `node bench/scale/node-group-process.ts <JSON of NodeGroupSettings>`.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { ManualClock } from '../../src/core/clock.ts';
import { isWarrenError, messageOf } from '../../src/core/errors.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import type { ApiRequestTotal } from '../../src/store/kubernetes/api-requests.ts';
import { countedSoFar } from './client-counts.ts';
import { ownerOf, scaleRanges } from './shared-range.ts';
import { type NodeForgetting, forgettingOf, LocalNodes } from './node-host.ts';
import type { SimulatedNode } from './simulated-node.ts';

/** What a group is started with: the harness's clock, range and the nodes' options. */
export interface NodeGroupSettings {
  readonly nowMs: number;
  readonly range: string;
  readonly blockSize?: number;
  readonly flags?: Readonly<Record<string, string>>;
  readonly memory?: boolean;
}

/** What the harness asks of a group, each with its arguments and its answer. */
export interface NodeGroupOps {
  open: { args: [name: string, dir: string, kubeconfig: string]; result: undefined };
  step: { args: [ms: number]; result: undefined };
  add: { args: [name: string, containerID: string]; result: number };
  del: { args: [name: string, containerID: string]; result: undefined };
  crash: { args: [name: string]; result: undefined };
  nodeGone: { args: [name: string]; result: undefined };
  nodeBack: { args: [name: string]; result: undefined };
  list: { args: [name: string, rangePool: string]; result: Allocation[] };
  forgetting: { args: []; result: NodeForgetting[] };
  counters: { args: []; result: Array<[name: string, totals: ApiRequestTotal[]]> };
  close: { args: []; result: undefined };
}

export type NodeGroupOp = keyof NodeGroupOps;

export interface NodeGroupRequest {
  readonly id: number;
  readonly op: NodeGroupOp;
  readonly args: readonly unknown[];
}

export interface NodeGroupAnswer {
  readonly id: number;
  readonly result?: unknown;
  /** The error's message; its WarrenError code apart, so the harness can tell ALREADY_RUNNING. */
  readonly error?: string;
  readonly code?: string;
}

/** Real ms between two looks at the group's counters after a step, and the looks that must agree. */
const QUIET_MS = 10;
const QUIET_POLLS = 3;
/** A step's quiet is not waited for longer than this (the harness's settle on the server follows). */
const QUIET_CAP_MS = 30_000;

const settings = JSON.parse(process.argv[2] ?? '{}') as NodeGroupSettings;
const clock = new ManualClock(settings.nowMs);
const ranges = scaleRanges(settings.range, settings.blockSize);
const nodes = new LocalNodes({
  clock,
  ranges,
  ...(settings.flags === undefined ? {} : { flags: settings.flags }),
  ...(settings.memory === undefined ? {} : { memory: settings.memory }),
});
/** The running nodes by name, as `nodes` holds them (for what only a node itself answers). */
const running = new Map<string, SimulatedNode>();

const node = (name: string): SimulatedNode => {
  const found = running.get(name);
  if (found === undefined) throw new Error(`no running node ${name} in this group`);
  return found;
};

/** Until the group's nodes count no new answer for QUIET_POLLS looks in a row (or QUIET_CAP_MS). */
async function quiet(): Promise<void> {
  const deadline = Date.now() + QUIET_CAP_MS;
  let seen = countedSoFar([...running.values()]);
  for (let still = 0; still < QUIET_POLLS && Date.now() < deadline; ) {
    await delay(QUIET_MS);
    const now = countedSoFar([...running.values()]);
    still = now === seen ? still + 1 : 0;
    seen = now;
  }
}

async function answer(request: NodeGroupRequest): Promise<unknown> {
  // Every op's arguments are strings but the step's ms (NodeGroupOps).
  const [name, second, third] = request.args as [string, string, string];
  switch (request.op) {
    case 'open':
      running.set(name, await nodes.open(name, second, third));
      return undefined;
    case 'step':
      clock.advance(Number(name));
      await quiet();
      return undefined;
    case 'add':
      return nodes.add(name, ownerOf(second));
    case 'del':
      return nodes.del(name, ownerOf(second));
    case 'crash':
      running.delete(name);
      return nodes.crash(name);
    case 'nodeGone':
      return nodes.nodeGone(name);
    case 'nodeBack':
      return nodes.nodeBack(name);
    case 'list':
      return node(name).store.list({ rangePool: second });
    case 'forgetting':
      return forgettingOf(running.values());
    case 'counters':
      return [...running].map(([name, n]) => [name, n.kubeRequests.totals()]);
    case 'close':
      await nodes.close();
      running.clear();
      return undefined;
    default: {
      const never: never = request.op;
      throw new Error(`unknown node group op ${String(never)}`);
    }
  }
}

const send = (message: unknown): void => {
  process.send?.(message);
};

process.on('disconnect', () => {
  void nodes.close().finally(() => process.exit(0));
});
process.on('message', (request: NodeGroupRequest) => {
  void answer(request).then(
    (result) => {
      send({ id: request.id, result } satisfies NodeGroupAnswer);
      if (request.op === 'close') process.disconnect();
    },
    (error: unknown) => {
      const code = isWarrenError(error) ? { code: error.code } : {};
      send({ id: request.id, error: messageOf(error), ...code } satisfies NodeGroupAnswer);
    },
  );
});
send({ ready: true });
