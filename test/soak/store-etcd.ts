/**
 * The soak on the etcd store (`--store etcd`): every agent on one real 3-member etcd cluster
 * (etcd-soak-cluster.ts) under one prefix, every node on ONE network name and ONE range, so an
 * address handed out twice across nodes is a duplicate the auditor sees; and etcd's own faults,
 * each with what Warren promises under it (docs/etcd.md, docs/recovery.md):
 * - `member-kill` (a member killed -9; the plan keeps at most one down, so a quorum stays) and
 *   `leader-kill` (the leader killed -9), each started again on its data a few steps later
 *   (`members-start`): ADD and DEL go on, calls fail over to the live members;
 * - `restore` (every member's data replaced by `etcdctl snapshot restore` of the backup taken by an
 *   earlier `snapshot`): the agents notice, stop allocating and mark the cluster in recovery; the
 *   operator (etcd-operator.ts) follows docs/recovery.md with the real CLI. Promised: no address
 *   handed out twice, every container keeps its address. The step returns once the recovery has
 *   begun (the marker seen or an accept made), not when it ends: a node it waits for may be down;
 * - `claim-delete` (`etcdctl del` of one claim key of a node): the owner claims it again at once;
 * - `publication-delete` (`etcdctl del` of one block's publication key, among the blocks whose owner's
 *   agent runs, judged by its announcement): the owner's watch of that key tells it, and it writes the
 *   publication again at its next publication run (2 s), its block idle or not; the step waits for
 *   it (REPUBLISH_BOUND_MS), and one not written again by then, its agent running all the while and
 *   no recovery under way, is a violation (republish.ts: the candidates are judged by their
 *   announcement, which an agent killed -9 leaves behind);
 * - `announcement-delete` (`etcdctl del` of a node's announcement): the agent announces itself again;
 * - `compact` (`etcdctl compact` at the revision now): every watch resumed from before it is refused
 *   as compacted; the agents list again and go on, nothing lost.
 *
 * The auditor's look at etcd (`auditCluster`, cluster-holdings.ts): no two nodes' claims overlap;
 * every live sandbox's address lies in a block its node claims or was granted to it (a loan), within
 * COVER_BOUND_MS of its agent's running time (a claim deleted is made again; a node down makes it
 * when back); not judged while a recovery marker stands (the claims come back with the accepts).
 * A node's state directory put back (plan.ts `restore-state`): the containers it published come
 * back at its start (`heldOutsideFile`).
 *
 * A node lost for good (plan.ts `node-lost`) is forgotten as docs/etcd.md says an operator does:
 * `warren node forget NAME` on another node's agent (the real CLI), asked again while it is refused
 * because the node's announcement has not lapsed yet (its lease, NODE_LEASE_SECONDS); after a restore that brought
 * back a node forgotten and not back yet, forgotten again (docs/recovery.md: the marker waits for
 * it until then).
 *
 * The agents publish on their defaults (a claim published with the addresses it hands out next, a
 * covered change written once settled): `heldOutsideFile` is what they published by name; a node's
 * file put back from a copy older than its publications keeps the addresses they announced as
 * placeholders, which the operator accepts once no live sandbox holds one (announced-placeholders.ts).
 */
import { etcdStoreArgs } from '../helpers/etcd-tiered.ts';
import type { SeededRandom } from '../helpers/random.ts';
import { type ClusterHoldings, UncoveredClock, overlappingClaims } from './cluster-holdings.ts';
import { acceptPlaceholders, storeAccept } from './announced-placeholders.ts';
import { EtcdOperator } from './etcd-operator.ts';
import { ETCD_SOAK_PREFIX, SoakEtcd } from './etcd-soak-cluster.ts';
import { REPUBLISH_BOUND_MS, REPUBLISH_POLL_MS, unwrittenExcuse } from './republish.ts';
import type { GroundTruth } from './ground-truth.ts';
import { join } from 'node:path';
import { CHILD_PATH, WARREN_BIN, run, waitFor } from '../helpers/processes.ts';
import type {
  SoakStore,
  StoreBackend,
  StoreFaultContext,
  StoreFaultPlanner,
  StoreNode,
  StorePlan,
  StoreStep,
} from './store.ts';

/**
 * The agents' node lease (`--node-lease`; 10 s by default): a lost node's forget waits for it to
 * lapse, which at 10 s was a fifth of a plan's time. Not as short as the kubernetes soak's Lease
 * (2 s): keep-alives wait out each election after a leader the plan kills, on a loaded machine.
 */
const NODE_LEASE_SECONDS = 5;
/** How long `warren node forget` is asked again while the node is still alive (its lease, with room). */
const FORGET_BOUND_MS = 60_000;
const FORGET_AGAIN_MS = 1_000;

/** How long the owner of a publication deleted by hand may take to write it again (ms; its runs are 2 s apart). */

/** How long a live sandbox's address may lie outside its node's claims, in its agent's running time. */
export const COVER_BOUND_MS = 10_000;

/** The actions of the etcd store's steps. */
export type EtcdAction =
  | 'member-kill'
  | 'leader-kill'
  | 'members-start'
  | 'snapshot'
  | 'restore'
  | 'claim-delete'
  | 'publication-delete'
  | 'announcement-delete'
  | 'compact';

const step = (action: EtcdAction, fault: boolean, arg?: number): StoreStep => ({
  kind: 'store',
  action,
  fault,
  ...(arg === undefined ? {} : { arg }),
});

/**
 * The planner's model: whether a member is down (started again 1-3 operations later) and whether
 * a backup was taken since the last restore (one is taken, now and then, by `due`).
 */
function etcdPlanner(): StoreFaultPlanner {
  let downFor: number | undefined;
  let snapshot = false;
  return {
    fault(random: SeededRandom): StoreStep[] {
      const action = random.weighted({
        'member-kill': downFor === undefined ? 3 : 0,
        'leader-kill': downFor === undefined ? 3 : 0,
        restore: downFor === undefined && snapshot ? 1.5 : 0,
        'claim-delete': 3,
        'publication-delete': 1,
        'announcement-delete': 1,
        compact: 1.5,
      });
      switch (action) {
        case 'member-kill':
        case 'leader-kill':
          downFor = random.int(1, 3);
          return [step(action, true, action === 'member-kill' ? random.int(0, 2) : undefined)];
        case 'restore':
          snapshot = false;
          return [step('restore', true)];
        case 'compact':
          return [step('compact', true)];
        case 'claim-delete':
        case 'publication-delete':
        case 'announcement-delete':
          // Which node (modulo the nodes) and which of its claims: the run's to resolve.
          return [step(action, true, random.int(0, 999))];
      }
    },
    due(random: SeededRandom): StoreStep[] {
      const out: StoreStep[] = [];
      if (downFor !== undefined && downFor-- <= 0) {
        downFor = undefined;
        out.push(step('members-start', false));
      }
      if (!snapshot && random.chance(0.08)) {
        snapshot = true;
        out.push(step('snapshot', false));
      }
      return out;
    },
    end(): StoreStep[] {
      const last = downFor === undefined ? [] : [step('members-start', false)];
      downFor = undefined;
      return last;
    },
  };
}

export const etcdPlan: StorePlan = { share: 0.4, planner: etcdPlanner };

/** A node the run passes: a SoakNode, whose agents' running time bounds the wait for a claim. */
interface RunningNode extends StoreNode {
  runningMs?(from: number, to: number): number;
}

class EtcdSoakStore implements SoakStore {
  readonly sharedRange = true;
  readonly #etcd: SoakEtcd;
  readonly #clock = new UncoveredClock();
  /** The run's nodes by index, as the harness hands them over (agentArgs, runStep). */
  readonly #nodes = new Map<number, RunningNode>();
  #operator: EtcdOperator | undefined;
  #log: (line: string) => void = () => {};
  /** The last fault step's context: what the operator's accepts are counted on. */
  #context: StoreFaultContext | undefined;
  /** Nodes lost and forgotten, not back yet: the node asked, to forget them again after a restore. */
  readonly #forgotten = new Map<string, { lost: StoreNode; from: StoreNode }>();

  constructor(etcd: SoakEtcd) {
    this.#etcd = etcd;
  }

  network(): { name: string; range: string } {
    return { name: 'soak-etcd', range: '10.239.0.0/26' };
  }

  agentArgs(node: StoreNode): readonly string[] {
    this.#nodes.set(node.index, node);
    // Empty blocks given back after 5 s rather than 300: claims and give-backs race the faults.
    return etcdStoreArgs(this.#etcd.endpoints, ETCD_SOAK_PREFIX, [
      '--block-grace',
      '5',
      '--node-lease',
      String(NODE_LEASE_SECONDS),
    ]);
  }

  /** The publication settings a node runs with (their defaults), not the e2e tests' (store-kube.ts says why). */
  agentEnv(): NodeJS.ProcessEnv {
    return { WARREN_PUBLISH_SETTLE: undefined, WARREN_PUBLISH_AHEAD: undefined };
  }

  /** The operator, started with the run's nodes at the first step that needs one. */
  #operatorOf(context: StoreFaultContext): EtcdOperator {
    if (this.#operator === undefined) {
      this.#operator = new EtcdOperator(
        context.nodes,
        async () => (await this.#etcd.holdings())?.recoveryPending,
        (line) => this.#log(line),
        (what) => context.count(what),
      );
      this.#operator.start();
    }
    return this.#operator;
  }

  async runStep(s: StoreStep, context: StoreFaultContext): Promise<void> {
    this.#log = context.log;
    this.#context = context;
    for (const node of context.nodes) this.#nodes.set(node.index, node);
    const nodeOf = (arg: number | undefined) => context.nodes[(arg ?? 0) % context.nodes.length] as StoreNode;
    const pickOf = (arg: number | undefined) => Math.floor((arg ?? 0) / context.nodes.length);
    const action = s.action as EtcdAction;
    switch (action) {
      case 'member-kill':
        context.log(`etcd: member ${await this.#etcd.killMember(s.arg ?? 0)} killed -9`);
        return;
      case 'leader-kill':
        context.log(`etcd: the leader, ${await this.#etcd.killLeader()}, killed -9`);
        return;
      case 'members-start':
        context.log(`etcd: started again: ${(await this.#etcd.startMembers()).join(', ') || 'none down'}`);
        return;
      case 'snapshot':
        context.log(`etcd: snapshot saved at revision ${await this.#etcd.snapshot()}`);
        return;
      case 'restore':
        return this.#restore(context);
      case 'claim-delete': {
        const node = nodeOf(s.arg);
        const deleted = await this.#etcd.deleteClaim(node.name, pickOf(s.arg));
        if (deleted === undefined) context.count('claim-delete: the node held no claim');
        context.log(`etcd: claim ${deleted ?? '(none)'} of ${node.name} deleted by hand`);
        return;
      }
      case 'publication-delete': {
        const deleted = await this.#etcd.deletePublication(s.arg ?? 0);
        if (deleted === undefined) return context.count('publication-delete: no block published by a running agent');
        context.log(`etcd: the publication of block ${deleted.block} of ${deleted.node} deleted by hand`);
        return this.#writtenAgain(deleted.block, deleted.node, context);
      }
      case 'announcement-delete': {
        const node = nodeOf(s.arg);
        await this.#etcd.deleteAnnouncement(node.name);
        context.log(`etcd: the announcement of ${node.name} deleted by hand`);
        return;
      }
      case 'compact':
        context.log(`etcd: compacted at revision ${await this.#etcd.compact()}`);
        return;
      default: {
        const never: never = action;
        throw new Error(`the etcd store has no step ${String(never)}`);
      }
    }
  }

  /**
   * After a publication deleted by hand: waits until its owner writes it again (its watch of the
   * publication key tells it; the next publication run writes it), its block given back meanwhile,
   * or REPUBLISH_BOUND_MS; not written by then, its agent up all the while and no recovery marker
   * standing, is a violation (republish.ts).
   */
  async #writtenAgain(block: string, node: string, context: StoreFaultContext): Promise<void> {
    const from = Date.now();
    const owner = [...this.#nodes.values()].find((n) => n.name === node);
    while (Date.now() - from < REPUBLISH_BOUND_MS) {
      const state = await this.#etcd.publicationState(block, node);
      if (state === 'published') {
        context.log(`etcd: ${node} wrote the publication of block ${block} again after ${Date.now() - from} ms`);
        return context.count('publication written again by its owner');
      }
      if (state === 'unclaimed') return context.count('publication-delete: its block given back first');
      await new Promise((resolve) => setTimeout(resolve, REPUBLISH_POLL_MS));
    }
    const excuse = unwrittenExcuse({
      ranMs: owner?.runningMs?.(from, Date.now()) ?? Date.now() - from,
      stood: (await this.#etcd.holdings())?.recoveryPending === undefined ? undefined : 'etcd is in recovery',
    });
    if (excuse !== undefined) return context.count(`publication-delete: ${excuse}`);
    this.#operatorOf(context).problems.push(
      `${node} did not write the publication of block ${block} again within ${REPUBLISH_BOUND_MS} ms of its deletion by hand`,
    );
  }

  /** The backup put back; then, when the data went back, until the recovery has begun. */
  async #restore(context: StoreFaultContext): Promise<void> {
    const operator = this.#operatorOf(context);
    const acceptsBefore = operator.accepts;
    const wentBack = await this.#etcd.restoreSnapshot();
    this.#clock.reset();
    context.log(
      `etcd: every member restored from the snapshot (${wentBack ? 'the data went back' : 'no write since'})`,
    );
    if (!wentBack) {
      context.count('restore with no write since the snapshot');
      return;
    }
    // The snapshot may hold a node forgotten since: the operator forgets it again (the marker waits for it).
    for (const { lost, from } of this.#forgotten.values()) {
      await this.lostNodes.forget(lost, from, context);
      context.count('node forgotten again after the restore');
    }
    try {
      await waitFor('the agents to notice that etcd went back (a recovery marker, or an accept)', async () =>
        operator.accepts > acceptsBefore || (await this.#etcd.holdings())?.recoveryPending !== undefined
          ? true
          : undefined,
      );
    } catch (error) {
      operator.problems.push(`after etcd was restored from an older snapshot: ${String(error)}`);
    }
  }

  readonly lostNodes = {
    forget: async (lost: StoreNode, from: StoreNode, context: StoreFaultContext): Promise<number> => {
      this.#forgotten.set(lost.name, { lost, from });
      const askable = [from, ...context.nodes.filter((n) => n.name !== lost.name && n.name !== from.name)];
      const until = Date.now() + FORGET_BOUND_MS;
      for (let attempt = 0; ; attempt++) {
        const asked = askable[attempt % askable.length] as StoreNode;
        const at = Date.now();
        const out = await run(
          process.execPath,
          [WARREN_BIN, 'node', 'forget', lost.name, '--socket', join(asked.stateDir, 'warren.sock')],
          { env: { ...process.env, PATH: CHILD_PATH } },
        );
        const said = `${out.stdout}${out.stderr}`.trim().replace(/\s+/g, ' ');
        if (out.code === 0) {
          context.log(`etcd operator: warren node forget ${lost.name} on ${asked.name}: ${said}`);
          context.count('warren node forget (docs/etcd.md)');
          return at;
        }
        // Alive (its announcement's lease not lapsed yet), or the node asked is down or in recovery: again.
        if (Date.now() > until)
          throw new Error(`warren node forget ${lost.name} refused for ${FORGET_BOUND_MS} ms: ${said}`);
        if (/is alive/.test(said)) context.count('warren node forget refused: the node still alive (asked again)');
        else context.log(`etcd operator: warren node forget ${lost.name} on ${asked.name} failed: ${said}`);
        // The node asked stopped allocating for a restore it saw: it accepts first (docs/recovery.md).
        if (/store went backwards|lost its data/.test(said))
          await storeAccept(asked, context, 'store accept (docs/recovery.md)');
        await new Promise((resolve) => setTimeout(resolve, FORGET_AGAIN_MS));
      }
    },
    held: async (node: StoreNode) => {
      const holdings = await this.#etcd.holdings();
      if (holdings === undefined) return undefined;
      return {
        blocks: holdings.claims.filter((c) => c.nodes[0] === node.name).map((c) => c.cidr),
        containers: await this.#etcd.publishedBy(node.name),
      };
    },
    away: (): boolean => false, // a majority of members always serves: etcd is never away as a whole
    returned: (node: StoreNode): boolean => {
      this.#forgotten.delete(node.name);
      return false; // `warren node forget` gave its blocks up as it answered
    },
  };

  async heldOutsideFile(node: StoreNode): Promise<ReadonlySet<string>> {
    return this.#etcd.publishedBy(node.name);
  }

  async auditCluster(truth: GroundTruth): Promise<ReadonlyArray<{ readonly key: string; readonly what: string }>> {
    // The operator's step after a node's disk was put back (announced-placeholders.ts).
    for (const node of this.#nodes.values()) await acceptPlaceholders(node, truth, this.#context);
    const found: Array<{ key: string; what: string }> = (this.#operator?.problems ?? []).map((what) => ({
      key: what,
      what,
    }));
    const holdings = await this.#etcd.holdings();
    if (holdings === undefined) return found;
    for (const what of overlappingClaims(holdings)) found.push({ key: what, what });
    if (holdings.recoveryPending !== undefined) {
      this.#clock.reset(); // the claims come back with the accepts
      return found;
    }
    return [...found, ...this.#uncovered(holdings, truth)];
  }

  #uncovered(holdings: ClusterHoldings, truth: GroundTruth): Array<{ key: string; what: string }> {
    const names = new Map([...this.#nodes.values()].map((n) => [n.name, n]));
    const held = truth
      .all()
      .filter((s) => s.state === 'live' && s.address !== undefined)
      .map((s) => ({
        sandbox: s.id,
        node: this.#nodes.get(s.node)?.name ?? `node ${s.node}`,
        address: s.address as string,
      }));
    const running = (name: string, from: number, to: number) => names.get(name)?.runningMs?.(from, to) ?? to - from;
    return this.#clock.judge(holdings, held, Date.now(), COVER_BOUND_MS, running);
  }

  async close(): Promise<void> {
    await this.#operator?.stop();
    await this.#etcd.close();
  }
}

export const etcdBackend: StoreBackend = {
  name: 'etcd',
  plan: etcdPlan,
  forgetsNodes: true,
  open: async () => new EtcdSoakStore(await SoakEtcd.start()),
};
