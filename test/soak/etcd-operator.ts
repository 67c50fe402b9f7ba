/**
 * The operator of the soak's etcd cluster after it lost its data: the procedure of docs/recovery.md
 * ("When etcd lost its data"), followed with the real CLI as test/e2e/store-restored-etcd.test.ts
 * follows it, but by a loop that runs beside the workload, since the nodes it must act on may be
 * down when etcd goes back (a node killed a step before) and come back steps later:
 * - while the recovery marker stands (read from etcd: the `recovery` key), `warren status --json` on
 *   each node, and `warren store accept` on each that answers and either stopped on the lost store
 *   (again if it stopped again) or is one the marker waits for (again while it does: an accept that
 *   could not claim every block of its node again leaves it there, docs/recovery.md).
 * Nothing is run while no marker stands: an idle look is one etcd read a second.
 *
 * What it saw goes to the run's log; an accept that names a CONFLICT is counted in the report's
 * faults table (the auditor judges duplicates and claims themselves); what never happened (no
 * agent noticed a restore) goes to `problems`, which the auditor reports.
 */
import { join } from 'node:path';
import { CHILD_PATH, WARREN_BIN, run } from '../helpers/processes.ts';
import type { StoreNode } from './store.ts';

const LOOK_MS = 1_000;

/** What `warren status --json` says of the cluster store; undefined when the agent did not answer. */
async function clusterProblem(socket: string): Promise<{ problem?: string } | undefined> {
  const s = await warren(socket, 'status', '--json');
  try {
    return (JSON.parse(s.stdout) as { cluster?: { problem?: string } }).cluster ?? {};
  } catch {
    return undefined;
  }
}

function warren(socket: string, ...args: string[]) {
  return run(process.execPath, [WARREN_BIN, ...args, '--socket', socket], {
    env: { ...process.env, PATH: CHILD_PATH },
  });
}

/** The agent waits for the cluster's recovery marker (src/store/tiered/recovery.ts says it so). */
export function waitsForRecovery(problem: string): boolean {
  return problem.startsWith('the cluster store is in recovery');
}

/** The agent stopped on a store that lost its data: each such message ends naming `warren store accept`. */
export function stoppedOnLostStore(problem: string): boolean {
  return !waitsForRecovery(problem) && problem.includes('warren store accept');
}

export class EtcdOperator {
  readonly #nodes: readonly StoreNode[];
  readonly #marker: () => Promise<readonly string[] | undefined>;
  readonly #log: (line: string) => void;
  readonly #count: (what: string) => void;
  /** Nodes accepted in the recovery under way (cleared when its marker is gone). */
  readonly #accepted = new Set<string>();
  readonly problems: string[] = [];
  /** Accepts run since the start: a restore's step waits for the first sign of a recovery. */
  accepts = 0;
  /** Recoveries seen to end (their marker removed). */
  recoveries = 0;
  #timer: NodeJS.Timeout | undefined;
  #looking: Promise<void> = Promise.resolve();
  #markerSeen = false;
  #busy = false;

  /** `marker`: the nodes the recovery marker waits for, undefined when none stands (a read of etcd). */
  constructor(
    nodes: readonly StoreNode[],
    marker: () => Promise<readonly string[] | undefined>,
    log: (line: string) => void,
    count: (what: string) => void,
  ) {
    this.#nodes = nodes;
    this.#marker = marker;
    this.#log = log;
    this.#count = count;
  }

  start(): void {
    this.#timer ??= setInterval(() => {
      if (this.#busy) return; // a look of several CLI calls may outlast the interval
      this.#busy = true;
      this.#looking = this.#look().finally(() => (this.#busy = false));
    }, LOOK_MS);
  }

  /** Whether a recovery marker stood at the last look. */
  get inRecovery(): boolean {
    return this.#markerSeen;
  }

  async #look(): Promise<void> {
    let pending: readonly string[] | undefined;
    try {
      pending = await this.#marker();
    } catch {
      return; // etcd away: the next look
    }
    if (pending === undefined) {
      if (this.#markerSeen) {
        this.recoveries += 1;
        this.#log(`etcd operator: the recovery ended (accepted on ${[...this.#accepted].join(', ') || 'no node'})`);
      }
      this.#markerSeen = false;
      this.#accepted.clear();
      return;
    }
    this.#markerSeen = true;
    for (const node of this.#nodes) {
      const socket = join(node.stateDir, 'warren.sock');
      const problem = (await clusterProblem(socket))?.problem;
      if (problem === undefined) continue; // not answering (down), or nothing to do
      // A node stopped is accepted, again if it stopped again; one the marker waits for, again while it
      // does (an accept that could not claim all its blocks again leaves its node on the marker).
      const waitedFor = pending.includes(node.name);
      if (!waitedFor && !stoppedOnLostStore(problem)) continue;
      const out = await warren(socket, 'store', 'accept');
      const said = `${out.stdout}${out.stderr}`.trim().replace(/\s+/g, ' ');
      // Exit 1 with "accepted the store" is an accept made while the marker still waits for others.
      if (out.code !== 0 && !/accepted the store as it is now/.test(said)) {
        this.#log(`etcd operator: warren store accept on ${node.name} failed (${out.code}): ${said}`);
        continue; // asked again at the next look
      }
      this.#accepted.add(node.name);
      this.accepts += 1;
      this.#log(`etcd operator: warren store accept on ${node.name}: ${said}`);
      // A CONFLICT is a block the node holds that it could not claim again: another node's claim, or
      // (seen after restores) another node's stale publication of it, which the node's claim check
      // then claims again past. The auditor judges what matters (duplicates, claims): counted here.
      if (/CONFLICT/.test(said)) this.#count('warren store accept named a CONFLICT');
    }
  }

  /** Stops looking, once the look under way is done. */
  async stop(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#looking;
  }
}
