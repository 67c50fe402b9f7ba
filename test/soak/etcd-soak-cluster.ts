/**
 * A real 3-member etcd cluster (Debian's etcd-server, test/helpers/etcd.ts `startEtcd(3)`) under
 * the soak's agents, the faults etcd itself suffers, and what the soak reads of it through a client
 * of its own (the etcd3 library, never Warren's tier):
 * - a member killed -9, and every killed member started again on its data (`killMember`,
 *   `killLeader`: the member all live members name as leader at that moment, `startMembers`);
 * - a backup and its restore: `snapshot` (`etcdctl snapshot save` from a live member) and
 *   `restoreSnapshot` (every member killed, its data directory replaced by `etcdctl snapshot
 *   restore` of the newest snapshot, and all started again: the disaster recovery of a whole
 *   cluster); what the operator does next is etcd-operator.ts's;
 * - keys deleted by hand with `etcdctl del`: a node's claim (`deleteClaim`), a block's publication
 *   (`deletePublication`), a node's announcement (`deleteAnnouncement`);
 * - reads: every claim, every grant not returned and the recovery marker (`holdings`, judged by
 *   cluster-holdings.ts), and the containers a node published (`publishedBy`).
 *
 * Every member is started by the helper and stopped by PID (SIGKILL) by `close()`; the snapshots
 * live in a temp dir `close()` removes (and the helpers remove at exit).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Etcd3, GRPCGenericError } from 'etcd3';
import { ETCDCTL_BIN, type EtcdCluster, type EtcdMember, restoreMemberData, startEtcd } from '../helpers/etcd.ts';
import { HANG_BOUND_MS, removeDir, run, tempDir, waitFor } from '../helpers/processes.ts';
import type { ClaimRecord, ClusterHoldings, GrantRecord } from './cluster-holdings.ts';

/** The key prefix every soak agent shares. */
export const ETCD_SOAK_PREFIX = '/warren-soak/';

const enc = encodeURIComponent;
/** What etcdctl says while the members elect a leader: worth running the command again. */
const ELECTION_UNDER_WAY = /context deadline exceeded|request timed out|leader changed|no leader/;
/** etcdctl commands that timed out are run again this many times at most, this far apart (ms). */
const ETCDCTL_TRIES = 5;
/**
 * How long a read through the auditor's client that fails on gRPC is run again: a hang's bound. Ten
 * tries 1 s apart were not enough on a loaded machine (load 12: the etcd short soak died on
 * UNAVAILABLE while its members came back).
 */
const READ_BOUND_MS = HANG_BOUND_MS;
const ETCDCTL_AGAIN_MS = 1_000;

/**
 * Whether a read that failed with `error` is worth running again on the other members: gRPC's
 * (UNAVAILABLE from a member killed, a deadline in an election) or the client's circuit breaker,
 * open for a few seconds after such failures. etcd3's gRPC errors are told by their class: their
 * `name` is Error's (a test of the name let UNAVAILABLE through: etcd seed 3943 step 4171 again).
 */
export function passingReadError(error: unknown): boolean {
  const breaker = (error as { isBrokenCircuitError?: unknown } | undefined)?.isBrokenCircuitError === true;
  return error instanceof GRPCGenericError || breaker;
}

function etcdctlEnv(): NodeJS.ProcessEnv {
  return { ...process.env, ETCDCTL_API: '3' };
}

/** A block key's CIDR: what follows its `#` (the store key's part; test/soak reads it, not Warren's codec). */
function cidrOfBlockKey(block: string): string {
  return block.slice(block.lastIndexOf('#') + 1);
}

export class SoakEtcd {
  readonly #cluster: EtcdCluster;
  /** The auditor's own client, on every member. */
  /** The auditor's client (`#reconnect` makes it again on the members not killed). */
  #client: Etcd3;
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

  /** Every member's client URL, for the agents' --etcd-endpoints. */
  get endpoints(): readonly string[] {
    return this.#cluster.endpoints;
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

  /**
   * A read through the auditor's client that a member killed or an election under way can fail
   * (the client's connection to the dead member: gRPC UNAVAILABLE, a deadline; or the client's
   * circuit breaker, open for a few seconds after such failures), run again on the others as an
   * operator's command is, for up to READ_BOUND_MS; any other error throws. The soak died on
   * an open breaker once (etcd seed 3943, a claim deleted by hand just after members were killed).
   */
  async #reading<T>(read: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + READ_BOUND_MS;
    for (;;) {
      try {
        return await read();
      } catch (error) {
        if (!passingReadError(error) || Date.now() >= deadline) throw error;
        this.#reconnect();
        await new Promise((resolve) => setTimeout(resolve, ETCDCTL_AGAIN_MS));
      }
    }
  }

  /**
   * The auditor's client made again, on the members not killed: one that kept asking a member just
   * killed failed every read for two minutes (etcd seed 3943 step 4171, a claim deleted by hand
   * just after the leader was killed: the run died on UNAVAILABLE, connection refused).
   */
  #reconnect(): void {
    const live = this.#cluster.members.filter((m) => !this.#down.has(m)).map((m) => m.clientURL);
    this.#client.close();
    this.#client = new Etcd3({ hosts: live.length > 0 ? live : this.#cluster.endpoints, dialTimeout: 2_000 });
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
    for (const m of members) await restoreMemberData(m, snapshot.path, members);
    // Together: one member alone has no quorum and is never healthy.
    await Promise.all(members.map((m) => this.#cluster.restart(m)));
    this.#down.clear();
    return before > snapshot.revision;
  }

  /** `etcdctl del` of one claim key of `node` (its `pick`-th, modulo how many it has); the key, or undefined if it holds none. */
  async deleteClaim(node: string, pick: number): Promise<string | undefined> {
    const indexPrefix = `${ETCD_SOAK_PREFIX}nodes-blocks/${enc(node)}/`;
    // nodes-blocks/<node>/<range>/<block> → <range>/<block>; any claim, published or not (a claim is
    // published before its block's first address: tiered/claim-announcements.ts).
    const blocks = (await this.#reading(() => this.#client.getAll().prefix(indexPrefix).keys()))
      .map((k) => k.slice(indexPrefix.length))
      .sort();
    if (blocks.length === 0) return undefined;
    const relative = blocks[pick % blocks.length] as string;
    const claim = `${ETCD_SOAK_PREFIX}blocks/${relative}`;
    await this.#etcdctl('del', claim);
    return decodeURIComponent(relative);
  }

  /**
   * `etcdctl del` of one block's publication key (its `pick`-th, modulo how many there are) among the
   * blocks (not loans) published by a node whose agent runs (its announcement stands); the block and
   * its node, or undefined if there is none.
   */
  async deletePublication(pick: number): Promise<{ readonly block: string; readonly node: string } | undefined> {
    // Read as every read of a fault is (`#reading`): the short soak died on "leader changed" here.
    const [published, announced] = await this.#reading(() =>
      Promise.all([
        this.#client.getAll().prefix(`${ETCD_SOAK_PREFIX}published/`).strings(),
        this.#client.getAll().prefix(`${ETCD_SOAK_PREFIX}nodes/`).keys(),
      ]),
    );
    const running = new Set(announced.map((k) => decodeURIComponent(k.slice(`${ETCD_SOAK_PREFIX}nodes/`.length))));
    const candidates = Object.entries(published)
      .filter(([, value]) => {
        const p = JSON.parse(value) as { node?: string; loan?: boolean };
        return p.loan !== true && typeof p.node === 'string' && running.has(p.node);
      })
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    if (candidates.length === 0) return undefined;
    const [key, value] = candidates[pick % candidates.length] as [string, string];
    await this.#etcdctl('del', key);
    const block = decodeURIComponent(key.slice(key.lastIndexOf('/') + 1));
    return { block, node: (JSON.parse(value) as { node: string }).node };
  }

  /**
   * Whether block `block`'s publication by `node` stands ('published'), or its claim is no longer
   * `node`'s ('unclaimed'), or neither ('missing'); undefined when etcd could not be read.
   */
  async publicationState(block: string, node: string): Promise<'published' | 'unclaimed' | 'missing' | undefined> {
    const range = encodeURIComponent(block.slice(0, block.indexOf('#')));
    const at = (what: string) => `${ETCD_SOAK_PREFIX}${what}/${range}/${encodeURIComponent(block)}`;
    try {
      const [published, claim] = await Promise.all([
        this.#client.get(at('published')).string(),
        this.#client.get(at('blocks')).string(),
      ]);
      if (published !== null && (JSON.parse(published) as { node?: string }).node === node) return 'published';
      return claim !== null && (JSON.parse(claim) as { node?: string }).node === node ? 'missing' : 'unclaimed';
    } catch (error) {
      if (passingReadError(error)) this.#reconnect(); // the next try on the members not killed
      return undefined; // a member away, an election: asked again
    }
  }

  /**
   * `etcdctl compact` at the revision now, as an operator (or the apiserver's compactor) does: every
   * watch resumed from before it gets "required revision has been compacted"; the revision compacted at.
   * A revision already compacted (read from a member still catching up after its restart, or the
   * history compacted past it before a restore) leaves the history as compacted as asked: no error.
   */
  async compact(): Promise<number> {
    const revision = await this.#reading(() => this.#revision());
    try {
      await this.#etcdctl('compact', String(revision));
    } catch (error) {
      if (!/required revision has been compacted/.test(String(error))) throw error;
    }
    return revision;
  }

  /** `etcdctl del` of `node`'s announcement. */
  async deleteAnnouncement(node: string): Promise<void> {
    await this.#etcdctl('del', `${ETCD_SOAK_PREFIX}nodes/${enc(node)}`);
  }

  /**
   * One etcdctl command on the live members, run again when it timed out or found no leader (an
   * election under way, the leader just killed: etcdctl's own 5 s deadline passes on a loaded
   * machine, or the server's own request timeout, or "leader changed"), as an operator runs it
   * again; any other failure, or ETCDCTL_TRIES such failures, throws.
   */
  async #etcdctl(...args: string[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const endpoints = this.#cluster.members.filter((m) => !this.#down.has(m)).map((m) => m.clientURL);
      const out = await run(ETCDCTL_BIN, ['--endpoints', endpoints.join(','), ...args], { env: etcdctlEnv() });
      if (out.code === 0) return;
      if (!ELECTION_UNDER_WAY.test(out.stderr) || attempt >= ETCDCTL_TRIES)
        throw new Error(`etcdctl ${args.join(' ')} failed: ${out.stderr}`);
      await new Promise((resolve) => setTimeout(resolve, ETCDCTL_AGAIN_MS));
    }
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
    } catch (error) {
      if (passingReadError(error)) this.#reconnect(); // the next look on the members not killed
      return undefined; // a member away, an election: the next look reads it
    }
  }

  /** The containers of `node`'s allocations in its publications. */
  async publishedBy(node: string): Promise<Set<string>> {
    const publications = await this.#reading(() =>
      this.#client.getAll().prefix(`${ETCD_SOAK_PREFIX}published/`).strings(),
    );
    const out = new Set<string>();
    for (const value of Object.values(publications)) {
      const p = JSON.parse(value) as { node?: string; allocations?: Array<{ containerID?: string; node?: string }> };
      if (p.node !== node) continue;
      for (const a of p.allocations ?? []) if (typeof a.containerID === 'string') out.add(a.containerID);
    }
    return out;
  }

  /** Every member killed by PID, the auditor's client closed, the snapshots removed. */
  async close(): Promise<void> {
    this.#client.close();
    await this.#cluster.stop();
    removeDir(this.#snapshots);
  }
}
