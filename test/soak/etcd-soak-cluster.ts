/**
 * The soak on the etcd store: a real 3-member etcd cluster (Debian's etcd-server, test/helpers/etcd.ts)
 * under every agent (`--store etcd`, one prefix), the faults etcd itself suffers, and what the
 * auditor reads of it.
 *
 * The faults, each as the product promises to survive it (docs/etcd.md, docs/recovery.md):
 * - a member killed -9, and started again on its data a few steps later: the other two keep a
 *   quorum, the agents' calls fail over to them;
 * - the leader killed -9 (the member all members name as leader at that moment), started again
 *   later: an election, a short delay;
 * - etcd's data restored from an older snapshot (`etcdctl snapshot save` earlier; now every member
 *   killed and its data directory replaced by `etcdctl snapshot restore`, the standard procedure),
 *   then the recovery of docs/recovery.md followed with the real CLI, as
 *   test/e2e/store-restored-etcd.test.ts does: `warren status` on every node until each has noticed,
 *   `warren store accept` on every node that stopped or that the recovery marker waits for, and
 *   `warren status` until none says it is in recovery. Promised: no address handed out twice, every
 *   container keeps its address;
 * - a claim key deleted by hand (`etcdctl del`): its owner claims it again at once from its watch
 *   (or when its agent is back);
 * - a node's announcement deleted by hand (`etcdctl del`): its agent announces itself again.
 *
 * What the auditor reads (`holdings`): every claim key (`blocks/`) and every grant not returned of
 * every address request (`requests/`), and the recovery marker, through a client of its own (the
 * etcd3 library, not Warren's tier), judged by cluster-holdings.ts.
 *
 * Every etcd member is started by test/helpers/etcd.ts and stopped by PID by `close()` (SIGKILL),
 * also after a step threw; snapshots live in a temp dir removed at exit.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { ETCDCTL_BIN, type EtcdCluster, type EtcdMember, startEtcd } from '../helpers/etcd.ts';
import { CHILD_PATH, WARREN_BIN, removeDir, run, tempDir, waitFor } from '../helpers/processes.ts';
import type { ClaimRecord, ClusterHoldings, GrantRecord } from './cluster-holdings.ts';

/** The key prefix every soak agent shares. */
export const ETCD_SOAK_PREFIX = '/warren-soak/';

/** What the recovery needs of a node: its name and its agent's socket (the CLI asks it). */
export interface RecoveringNode {
  readonly name: string;
  readonly socket: string;
}

/** What a recovery did, for the step's log line and the auditor. */
export interface RecoveryReport {
  /** The nodes `warren store accept` ran on, with what it printed. */
  readonly accepted: ReadonlyArray<{ readonly node: string; readonly said: string }>;
  /** Nodes that never said they noticed, and accepts that named a conflict: the auditor's to report. */
  readonly problems: readonly string[];
}

const enc = encodeURIComponent;

function etcdctlEnv(): NodeJS.ProcessEnv {
  return { ...process.env, ETCDCTL_API: '3' };
}

function cli(socket: string, ...args: string[]) {
  return run(process.execPath, [WARREN_BIN, ...args, '--socket', socket], {
    env: { ...process.env, PATH: CHILD_PATH },
  });
}

/** What `warren status --json` says of the cluster store; undefined when the agent did not answer. */
async function clusterProblem(node: RecoveringNode): Promise<{ problem?: string } | undefined> {
  const s = await cli(node.socket, 'status', '--json');
  try {
    return (JSON.parse(s.stdout) as { cluster?: { problem?: string } }).cluster ?? {};
  } catch {
    return undefined;
  }
}

/** The agent stopped on a store that lost its data (continuity.ts, identity.ts): `warren store accept` is its way out. */
function stoppedOnLostStore(problem: string): boolean {
  return !inRecovery(problem) && problem.includes('warren store accept');
}

/** The agent waits for the cluster's recovery marker (tiered/recovery.ts). */
function inRecovery(problem: string): boolean {
  return problem.startsWith('the cluster store is in recovery');
}

/** A block key's CIDR: what follows its `#` (the store key's part; test/soak reads it, not Warren's codec). */
function cidrOfBlockKey(block: string): string {
  return block.slice(block.lastIndexOf('#') + 1);
}

export class SoakEtcd {
  readonly #cluster: EtcdCluster;
  /** The auditor's own client, on every member. */
  readonly #client: Etcd3;
  readonly #snapshots: string;
  #snapshot: { path: string; revision: number } | undefined;
  /** Members killed by a fault and not started again yet. */
  readonly #down = new Set<EtcdMember>();

  private constructor(cluster: EtcdCluster) {
    this.#cluster = cluster;
    this.#client = new Etcd3({ hosts: cluster.endpoints, dialTimeout: 2_000 });
    this.#snapshots = tempDir('warren-soak-etcd-snapshots-');
  }

  /** Three members on loopback, healthy. */
  static async start(): Promise<SoakEtcd> {
    return new SoakEtcd(await startEtcd(3));
  }

  get members(): number {
    return this.#cluster.members.length;
  }

  /** The store flags of every agent (with --node-name, its netns dirs and release settings from the harness). */
  agentArgs(): string[] {
    return [
      '--store',
      'etcd',
      '--etcd-endpoints',
      this.#cluster.endpoints.join(','),
      '--etcd-prefix',
      ETCD_SOAK_PREFIX,
      // The cluster chores (renewal, the store's identity check, blocks given back) every second,
      // as the e2e tests on etcd run them: a loss is noticed within a step or two.
      '--upkeep-interval',
      '1',
      // Empty blocks given back after 5 s rather than 300: claims and give-backs race the faults.
      '--block-grace',
      '5',
    ];
  }

  #member(index: number): EtcdMember {
    const member = this.#cluster.members[index % this.#cluster.members.length];
    if (member === undefined) throw new Error(`no etcd member ${index}`);
    return member;
  }

  /** kill -9 of member `index` (modulo the size); the plan keeps at most one down, so a quorum stays. */
  async killMember(index: number): Promise<string> {
    const member = this.#member(index);
    await this.#cluster.kill(member);
    this.#down.add(member);
    return member.name;
  }

  /** kill -9 of the member every member names as leader now. */
  async killLeader(): Promise<string> {
    const leader = await this.#leader();
    await this.#cluster.kill(leader);
    this.#down.add(leader);
    return leader.name;
  }

  /** Every member a fault killed, started again on its data. */
  async startMembers(): Promise<string[]> {
    const down = [...this.#down];
    await Promise.all(down.map((m) => this.#cluster.restart(m)));
    for (const m of down) this.#down.delete(m);
    return down.map((m) => m.name);
  }

  /** The member the live members agree leads, asked of each through a client on it alone. */
  async #leader(): Promise<EtcdMember> {
    const up = this.#cluster.members.filter((m) => !this.#down.has(m));
    return waitFor('one etcd leader the live members agree on', async () => {
      const seen: Array<{ member: EtcdMember; id: string; leader: string }> = [];
      for (const member of up) {
        const client = new Etcd3({ hosts: [member.clientURL], dialTimeout: 2_000 });
        try {
          const status = await client.maintenance.status();
          seen.push({ member, id: String(status.header.member_id), leader: String(status.leader) });
        } catch {
          return undefined;
        } finally {
          client.close();
        }
      }
      const leaders = new Set(seen.map((s) => s.leader));
      return leaders.size === 1 ? seen.find((s) => s.id === s.leader)?.member : undefined;
    });
  }

  /** `etcdctl snapshot save` from a live member: the backup a later restore puts back. */
  async snapshot(): Promise<number> {
    const member = this.#cluster.members.find((m) => !this.#down.has(m));
    if (member === undefined) throw new Error('no etcd member up to take a snapshot from');
    const path = join(this.#snapshots, `snapshot-${Date.now()}.db`);
    await this.#cluster.snapshot(member, path);
    const status = await run(ETCDCTL_BIN, ['snapshot', 'status', path, '-w', 'json'], { env: etcdctlEnv() });
    if (status.code !== 0) throw new Error(`etcdctl snapshot status failed: ${status.stderr}`);
    const revision = Number((JSON.parse(status.stdout) as { revision: number }).revision);
    if (this.#snapshot !== undefined) rmSync(this.#snapshot.path, { force: true });
    this.#snapshot = { path, revision };
    return revision;
  }

  get hasSnapshot(): boolean {
    return this.#snapshot !== undefined;
  }

  /** The store's revision now (a read through the auditor's client). */
  async #revision(): Promise<number> {
    const response = await this.#client.get(`${ETCD_SOAK_PREFIX}identity`).exec();
    return Number(response.header.revision);
  }

  /**
   * Every member killed, its data directory replaced by `etcdctl snapshot restore` of the newest
   * snapshot (same name, peer URL and cluster token as the helper starts it with), and all started
   * again: the disaster recovery of a whole cluster. True when the data went back (writes were
   * made since the snapshot), so the agents must notice and the recovery follow.
   */
  async restoreSnapshot(): Promise<boolean> {
    const snapshot = this.#snapshot;
    if (snapshot === undefined) throw new Error('restore with no snapshot taken');
    const before = await waitFor('the etcd revision before the restore', () => this.#revision().catch(() => undefined));
    const members = this.#cluster.members;
    for (const m of members) await this.#cluster.kill(m);
    const initialCluster = members.map((m) => `${m.name}=${m.peerURL}`).join(',');
    for (const m of members) {
      rmSync(m.dataDir, { recursive: true, force: true });
      const restored = await run(
        ETCDCTL_BIN,
        [
          'snapshot',
          'restore',
          snapshot.path,
          '--name',
          m.name,
          '--data-dir',
          m.dataDir,
          '--initial-cluster',
          initialCluster,
          '--initial-advertise-peer-urls',
          m.peerURL,
          // The token test/helpers/etcd.ts starts every member with: the restored cluster is the same one.
          '--initial-cluster-token',
          `warren-test-${process.pid}`,
        ],
        { env: etcdctlEnv() },
      );
      if (restored.code !== 0) throw new Error(`etcdctl snapshot restore failed for ${m.name}: ${restored.stderr}`);
    }
    // Together: one member alone has no quorum and is never healthy.
    await Promise.all(members.map((m) => this.#cluster.restart(m)));
    this.#down.clear();
    return before > snapshot.revision;
  }

  /**
   * The recovery of docs/recovery.md ("When etcd lost its data") with the real CLI: every node's
   * `warren status` until it says the store lost its data or the cluster is in recovery; `warren
   * store accept` on each node that stopped or that the recovery marker waits for; again until no
   * node has a problem. Each wait is bounded by the hang bound; what did not happen is returned
   * as a problem, not thrown, so the soak goes on and the auditor reports it.
   */
  async recover(nodes: readonly RecoveringNode[]): Promise<RecoveryReport> {
    const problems: string[] = [];
    const accepted: Array<{ node: string; said: string }> = [];
    try {
      await waitFor('every agent to notice that etcd went back', async () => {
        for (const node of nodes) {
          const problem = (await clusterProblem(node))?.problem ?? '';
          if (!stoppedOnLostStore(problem) && !inRecovery(problem)) return undefined;
        }
        return true;
      });
    } catch (error) {
      problems.push(`after etcd was restored from an older snapshot: ${String(error)}`);
    }
    const done = new Set<string>();
    try {
      await waitFor('the recovery to end on every node', async () => {
        const pending = new Set((await this.holdings())?.recoveryPending ?? []);
        let left = 0;
        for (const node of nodes) {
          const problem = (await clusterProblem(node))?.problem;
          if (problem === undefined) continue;
          left += 1;
          if (done.has(node.name) || !(stoppedOnLostStore(problem) || pending.has(node.name))) continue;
          const out = await cli(node.socket, 'store', 'accept');
          if (out.code !== 0) continue; // asked again at the next round
          done.add(node.name);
          const said = `${out.stdout}${out.stderr}`.trim();
          accepted.push({ node: node.name, said });
          if (/CONFLICT/.test(said)) problems.push(`warren store accept on ${node.name} named a conflict: ${said}`);
        }
        return left === 0 ? true : undefined;
      });
    } catch (error) {
      problems.push(`the recovery did not end: ${String(error)}`);
    }
    return { accepted, problems };
  }

  /** `etcdctl del` of one claim key of `node` (its `pick`-th, modulo how many it has); the key, or undefined if it holds none. */
  async deleteClaim(node: string, pick: number): Promise<string | undefined> {
    const index = await this.#client
      .getAll()
      .prefix(`${ETCD_SOAK_PREFIX}nodes-blocks/${enc(node)}/`)
      .keys();
    if (index.length === 0) return undefined;
    const indexKey = index.sort()[pick % index.length] as string;
    // nodes-blocks/<node>/<range>/<block> → blocks/<range>/<block>
    const relative = indexKey.slice(ETCD_SOAK_PREFIX.length).split('/').slice(2).join('/');
    const claim = `${ETCD_SOAK_PREFIX}blocks/${relative}`;
    await this.#etcdctl('del', claim);
    return decodeURIComponent(relative);
  }

  /** `etcdctl del` of `node`'s announcement. */
  async deleteAnnouncement(node: string): Promise<void> {
    await this.#etcdctl('del', `${ETCD_SOAK_PREFIX}nodes/${enc(node)}`);
  }

  async #etcdctl(...args: string[]): Promise<void> {
    const endpoints = this.#cluster.members.filter((m) => !this.#down.has(m)).map((m) => m.clientURL);
    const out = await run(ETCDCTL_BIN, ['--endpoints', endpoints.join(','), ...args], { env: etcdctlEnv() });
    if (out.code !== 0) throw new Error(`etcdctl ${args.join(' ')} failed: ${out.stderr}`);
  }

  /** The claims, the grants not returned, and the recovery marker; undefined when etcd could not be read. */
  async holdings(): Promise<ClusterHoldings | undefined> {
    try {
      const [blocks, requests, marker] = await Promise.all([
        this.#client.getAll().prefix(`${ETCD_SOAK_PREFIX}blocks/`).strings(),
        this.#client.getAll().prefix(`${ETCD_SOAK_PREFIX}requests/`).strings(),
        this.#client.get(`${ETCD_SOAK_PREFIX}recovery`).string(),
      ]);
      const claims: ClaimRecord[] = [];
      for (const [key, value] of Object.entries(blocks)) {
        const block = decodeURIComponent(key.slice(key.lastIndexOf('/') + 1));
        const v = JSON.parse(value) as { node?: unknown; offeredTo?: unknown; takenFrom?: unknown };
        const nodes = [v.node, v.offeredTo, v.takenFrom].filter((n): n is string => typeof n === 'string');
        claims.push({ block, cidr: cidrOfBlockKey(block), nodes });
      }
      const grants: GrantRecord[] = [];
      for (const value of Object.values(requests)) {
        const r = JSON.parse(value) as {
          node: string;
          grants?: Array<{ address: string; lender: string; returned?: boolean }>;
        };
        for (const g of r.grants ?? [])
          if (g.returned !== true)
            grants.push({ borrower: r.node, address: g.address.split('/')[0] as string, lender: g.lender });
      }
      const pending =
        marker === null ? undefined : ((JSON.parse(marker) as { pending?: string[] }).pending ?? []).slice();
      return { claims, grants, ...(pending === undefined ? {} : { recoveryPending: pending }) };
    } catch {
      return undefined; // a member away, an election: the next look reads it
    }
  }

  /** Every member killed by PID, the auditor's client closed, the snapshots removed. */
  async close(): Promise<void> {
    this.#client.close();
    await this.#cluster.stop();
    removeDir(this.#snapshots);
  }
}
