/**
 * The operator-facing queries and actions of the agent (status, pools, allocations, release),
 * over the allocator and the store. Release by hand is the same idempotent release a DEL does.
 */
import type { Clock } from '../core/clock.ts';
import { WarrenError, messageOf } from '../core/errors.ts';
import { formatIP, parseIP } from '../ipam/address.ts';
import type { Allocation } from '../ipam/allocation.ts';
import type { Allocator } from '../store/allocator.ts';
import { type AllocationFilter, type Store, rangePoolOf } from '../store/store.ts';
import type { AuditReport } from './audit.ts';
import type { ReconcilerStatus, ReleaseReconciler } from './release-reconciler.ts';
import type { ContainerdSourceStatus } from '../sources/containerd/event-source.ts';
import type { ContainerReleasesStatus } from './container-releases.ts';

export interface AgentStatus {
  readonly node: string;
  readonly pid: number;
  readonly version: string;
  readonly startedAt: string;
  readonly uptimeSeconds: number;
  readonly socket: string;
  readonly store: { readonly description: string; readonly healthy: boolean; readonly error?: string };
  readonly ready: boolean;
  readonly pools: number;
  readonly allocations: number;
  readonly reconciler: ReconcilerStatus;
  /** On a store shared by nodes: who is alive, and the blocks this node holds. */
  readonly cluster?: { readonly liveNodes: readonly string[]; readonly ownBlocks: number; readonly thisNodeAnnounced: boolean };
  /** The containerd event source, when enabled. */
  readonly containerd?: ContainerdStatus;
}

export interface PoolReport {
  readonly pool: string;
  readonly subnet?: string;
  readonly first?: string;
  readonly last?: string;
  readonly capacity?: string;
  readonly allocated: number;
  readonly resting: number;
  /** allocated / capacity, 0..1; undefined when the capacity is unknown. */
  readonly utilisation?: number;
  /** For a block of a range shared by nodes: the node that claimed it. */
  readonly node?: string;
  /** For a range split into blocks: the block prefix length and how many blocks are claimed. */
  readonly blockPrefix?: number;
  readonly blocks?: number;
}

export interface NodeReport {
  readonly node: string;
  /** The agent holds its announcement now. */
  readonly alive: boolean;
  readonly since?: string;
  readonly version?: string;
  /** Blocks with this node's affinity. */
  readonly blocks: string[];
  /** Allocations this node's agent made. */
  readonly allocations: number;
}

export interface AgentServiceOptions {
  readonly store: Store;
  readonly allocator: Allocator;
  readonly clock: Clock;
  readonly socket: string;
  readonly version: string;
  readonly reconciler: ReleaseReconciler;
  /** The containerd event source and what it released, when enabled. */
  readonly containerd?: () => ContainerdStatus;
}

export type ContainerdStatus = ContainerdSourceStatus & { readonly releases: ContainerReleasesStatus };

export class AgentService {
  readonly #o: AgentServiceOptions;
  readonly #startedAt: number;

  constructor(options: AgentServiceOptions) {
    this.#o = options;
    this.#startedAt = options.clock.now();
  }

  /** Throws NOT_READY when ADD cannot be served. */
  async readiness(): Promise<void> {
    try {
      await this.#o.store.ping();
    } catch (error) {
      throw new WarrenError('NOT_READY', `store ${this.#o.store.description} is not usable: ${messageOf(error)}`, { cause: error });
    }
  }

  async status(): Promise<AgentStatus> {
    let error: string | undefined;
    try {
      await this.#o.store.ping();
    } catch (e) {
      error = (e as Error).message;
    }
    const pools = error === undefined ? await this.#o.store.pools() : [];
    let cluster: AgentStatus['cluster'];
    const membership = this.#o.store.membership;
    if (membership !== undefined && error === undefined) {
      const live = (await membership.liveNodes()).map((n) => n.node);
      cluster = { liveNodes: live, ownBlocks: pools.filter((p) => p.affinity === this.#o.allocator.node).length, thisNodeAnnounced: live.includes(this.#o.allocator.node) };
    }
    const now = this.#o.clock.now();
    return {
      node: this.#o.allocator.node,
      pid: process.pid,
      version: this.#o.version,
      startedAt: new Date(this.#startedAt).toISOString(),
      uptimeSeconds: Math.round((now - this.#startedAt) / 1000),
      socket: this.#o.socket,
      store: { description: this.#o.store.description, healthy: error === undefined, ...(error === undefined ? {} : { error }) },
      ready: error === undefined,
      // Ranges, not blocks: a range split into blocks has a store pool of its own.
      pools: pools.filter((p) => !p.pool.includes('#')).length,
      allocations: pools.reduce((sum, p) => sum + p.allocated, 0),
      reconciler: this.#o.reconciler.status(),
      ...(cluster === undefined ? {} : { cluster }),
      ...(this.#o.containerd === undefined ? {} : { containerd: this.#o.containerd() }),
    };
  }

  /** Every allocation judged against what the node can observe; `fix` releases the provably stale. */
  async audit(fix: boolean): Promise<AuditReport> {
    return this.#o.reconciler.audit(fix);
  }

  journal(): ReconcilerStatus {
    return this.#o.reconciler.status();
  }

  /** Every pool; a range split into blocks is reported whole (its blocks summed) and block by block. */
  async pools(): Promise<PoolReport[]> {
    const summaries = await this.#o.store.pools();
    // Block totals per range pool, in one pass.
    const totals = new Map<string, { allocated: number; resting: number; blocks: number }>();
    for (const b of summaries) {
      if (!b.pool.includes('#')) continue;
      const t = totals.get(rangePoolOf(b.pool)) ?? { allocated: 0, resting: 0, blocks: 0 };
      t.allocated += b.allocated;
      t.resting += b.resting;
      if (b.affinity !== undefined) t.blocks += 1;
      totals.set(rangePoolOf(b.pool), t);
    }
    return summaries.map((p) => {
      let { allocated, resting } = p;
      let blocks: number | undefined;
      if (p.description?.blockPrefix !== undefined) {
        const t = totals.get(p.pool) ?? { allocated: 0, resting: 0, blocks: 0 };
        ({ allocated, resting, blocks } = t);
      }
      const capacity = p.description === undefined ? undefined : Number(p.description.capacity);
      return {
        pool: p.pool,
        ...(p.description === undefined
          ? {}
          : { subnet: p.description.subnet, first: p.description.first, last: p.description.last, capacity: p.description.capacity }),
        allocated,
        resting,
        ...(capacity === undefined || capacity === 0 ? {} : { utilisation: allocated / capacity }),
        ...(p.affinity === undefined ? {} : { node: p.affinity }),
        ...(p.description?.blockPrefix === undefined ? {} : { blockPrefix: p.description.blockPrefix, blocks }),
      };
    });
  }

  /** Nodes sharing the store: announced ones, and any that still own blocks or allocations. */
  async nodes(): Promise<NodeReport[]> {
    const membership = this.#o.store.membership;
    if (membership === undefined) throw new WarrenError('BAD_REQUEST', `store ${this.#o.store.description} is not shared by nodes; nodes exist with --store etcd`);
    const [live, summaries, allocations] = await Promise.all([membership.liveNodes(), this.#o.store.pools(), this.#o.store.list()]);
    const nodes = new Map<string, { alive: boolean; since?: string; version?: string; blocks: string[]; allocations: number }>();
    const entry = (name: string) => {
      let n = nodes.get(name);
      if (n === undefined) {
        n = { alive: false, blocks: [], allocations: 0 };
        nodes.set(name, n);
      }
      return n;
    };
    for (const record of live) Object.assign(entry(record.node), { alive: true, since: new Date(record.since).toISOString(), ...(record.version === undefined ? {} : { version: record.version }) });
    for (const p of summaries) if (p.affinity !== undefined) entry(p.affinity).blocks.push(p.pool);
    for (const a of allocations) entry(a.node).allocations += 1;
    return [...nodes].sort(([a], [b]) => (a < b ? -1 : 1)).map(([node, n]) => ({ node, ...n }));
  }

  /** Frees what a node that is gone for good held; refuses while its agent is alive. */
  async forgetNode(body: unknown): Promise<{ node: string; released: Allocation[]; blocks: string[] }> {
    const node = typeof body === 'object' && body !== null ? (body as { node?: unknown }).node : undefined;
    if (typeof node !== 'string' || node === '') throw new WarrenError('BAD_REQUEST', 'forget needs {"node": "<name>"}');
    const membership = this.#o.store.membership;
    if (membership === undefined) throw new WarrenError('BAD_REQUEST', `store ${this.#o.store.description} is not shared by nodes; there is no node to forget`);
    const live = await membership.liveNodes();
    if (live.some((n) => n.node === node)) {
      throw new WarrenError('BAD_REQUEST', `node ${node} is alive (its agent holds its announcement); stop that agent first, or wait for its lease to lapse`);
    }
    return { node, ...(await this.#o.allocator.forgetNode(node)) };
  }

  async allocations(filter: AllocationFilter): Promise<Allocation[]> {
    if (filter.address !== undefined) {
      const ip = parseIP(filter.address);
      if (ip === undefined) throw new WarrenError('BAD_REQUEST', `address "${filter.address}" is not an IP address`);
      return this.#o.store.list({ ...filter, address: formatIP(ip) });
    }
    return this.#o.store.list(filter);
  }

  /** {pool, address}: that address. {containerID, network?, ifname?}: everything it holds. */
  async release(body: unknown): Promise<{ released: Allocation[] }> {
    if (typeof body !== 'object' || body === null) throw new WarrenError('BAD_REQUEST', 'release needs a JSON object');
    const b = body as Record<string, unknown>;
    for (const key of Object.keys(b)) {
      if (!['pool', 'address', 'containerID', 'network', 'ifname'].includes(key)) throw new WarrenError('BAD_REQUEST', `release: unknown field "${key}"`);
      if (typeof b[key] !== 'string' || b[key] === '') throw new WarrenError('BAD_REQUEST', `release: ${key} must be a non-empty string`);
    }
    const s = b as Record<string, string | undefined>;
    if (s.address !== undefined) {
      const ip = parseIP(s.address);
      if (ip === undefined) throw new WarrenError('BAD_REQUEST', `release: address "${s.address}" is not an IP address`);
      const address = formatIP(ip);
      const pools = s.pool !== undefined ? [s.pool] : [...new Set((await this.#o.store.list({ address })).map((a) => a.pool))];
      if (pools.length > 1) throw new WarrenError('BAD_REQUEST', `release: ${address} is allocated in several pools (${pools.join(', ')}); name one with pool`);
      const released: Allocation[] = [];
      for (const pool of pools) released.push(...(await this.#o.allocator.releaseAddresses(pool, [address])));
      return { released };
    }
    if (s.containerID !== undefined) {
      const held = await this.#o.store.list({
        containerID: s.containerID,
        ...(s.network === undefined ? {} : { network: s.network }),
        ...(s.ifname === undefined ? {} : { ifname: s.ifname }),
      });
      const released: Allocation[] = [];
      for (const network of new Set(held.map((a) => a.network))) {
        released.push(...(await this.#o.allocator.release({ network, containerID: s.containerID, ...(s.ifname === undefined ? {} : { ifname: s.ifname }) })));
      }
      return { released };
    }
    throw new WarrenError('BAD_REQUEST', 'release needs an address (with an optional pool) or a containerID (with optional network and ifname)');
  }
}
