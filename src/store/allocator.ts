/**
 * Allocation over any Store: the pure engine (ipam/pool-state.ts) decides, the store commits with
 * an optimistic revision check, and a conflict means "someone else moved the pool": reload and
 * decide again. Per pool, this process never runs two decisions at once (KeyedMutex), so in the
 * single-writer case a conflict never happens and the cached picture of a pool stays valid.
 *
 * Guarantees:
 * - allocate is idempotent per (network, containerID, ifname) and range: a retry returns the
 *   address already held;
 * - an attachment over several ranges gets all of its addresses or none (what this call added is
 *   released again when a later range fails);
 * - releasing what is not allocated is a no-op.
 */
import type { Clock } from '../core/clock.ts';
import { WarrenError, messageOf } from '../core/errors.ts';
import { KeyedMutex } from '../core/keyed-mutex.ts';
import { type IPAddress, formatIP, parseIP } from '../ipam/address.ts';
import type { Allocation, Owner } from '../ipam/allocation.ts';
import { type RangeSpec, capacityOf, inSubnet } from '../ipam/config.ts';
import { PoolState } from '../ipam/pool-state.ts';
import type { PoolDescription, PoolOp, PoolSnapshot, Revision, Store } from './store.ts';

export interface AllocateRequest {
  readonly owner: Owner;
  readonly ranges: readonly RangeSpec[];
  /** Addresses asked for (CNI_ARGS IP=, runtimeConfig ips); each must fall in one range. */
  readonly requested?: readonly IPAddress[];
  readonly cooldownSeconds?: number;
  readonly podNamespace?: string;
  readonly podName?: string;
  readonly podUID?: string;
  readonly netns?: string;
}

export interface Assignment {
  readonly range: RangeSpec;
  readonly allocation: Allocation;
  /** False when the address was already held by this owner (a retried ADD). */
  readonly fresh: boolean;
}

export interface GcOutcome {
  readonly released: Allocation[];
  readonly errors: string[];
}

export interface AllocatorOptions {
  readonly store: Store;
  readonly clock: Clock;
  readonly node: string;
  /** Decide-and-commit rounds before giving up with TRY_AGAIN. Default 8. */
  readonly maxAttempts?: number;
}

interface CachedPool {
  revision: Revision;
  state: PoolState;
  /** Last description written, so it is rewritten only when it changes. */
  description?: string;
}

export class Allocator {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #node: string;
  readonly #maxAttempts: number;
  /** One decision per pool at a time. */
  readonly #locks = new KeyedMutex();
  /** Pools as last read or written; revalidated against the store's revision before each use. */
  readonly #pools = new Map<string, CachedPool>();

  constructor(options: AllocatorOptions) {
    this.#store = options.store;
    this.#clock = options.clock;
    this.#node = options.node;
    this.#maxAttempts = options.maxAttempts ?? 8;
  }

  get node(): string {
    return this.#node;
  }

  /** Everything an owner holds, in every pool. */
  async held(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]> {
    return this.#store.findByOwner(owner);
  }

  async allocate(request: AllocateRequest): Promise<Assignment[]> {
    const wanted = matchRequested(request.ranges, request.requested ?? []);
    const done: Assignment[] = [];
    try {
      for (const range of request.ranges) {
        done.push(await this.#allocateIn(range, request, wanted.get(range)));
      }
    } catch (error) {
      const added = done.filter((a) => a.fresh);
      for (const a of added) {
        await this.releaseAddresses(a.allocation.pool, [a.allocation.address], request.cooldownSeconds ?? 0).catch(() => undefined);
      }
      throw error;
    }
    return done;
  }

  async #allocateIn(range: RangeSpec, request: AllocateRequest, requested: IPAddress | undefined): Promise<Assignment> {
    const pool = range.pool;
    return this.#locks.run(pool, async () => {
      for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
        const held = (await this.#store.findByOwner(request.owner)).find((a) => a.pool === pool);
        if (held !== undefined) {
          if (requested !== undefined && held.address !== formatIP(requested)) {
            throw new WarrenError(
              'ADDRESS_UNAVAILABLE',
              `container ${request.owner.containerID} (${request.owner.ifname}) already holds ${held.address} in ${pool}, not the requested ${formatIP(requested)}`,
            );
          }
          return { range, allocation: held, fresh: false };
        }
        const cached = await this.#load(pool);
        const now = this.#clock.now();
        const ops: PoolOp[] = cached.state.expireRests(now).map((a) => ({ op: 'unrest', address: formatIP({ family: range.family, value: a }) }));
        let address: bigint;
        if (requested !== undefined) {
          address = requested.value;
          const verdict = cached.state.checkRequest(range, address);
          switch (verdict.kind) {
            case 'free':
            case 'resting': // an explicit request overrides the cooldown: the operator asked for this address
              break;
            case 'occupied':
              throw new WarrenError('ADDRESS_UNAVAILABLE', `requested address ${formatIP(requested)} is already allocated in ${pool}`);
            case 'outside':
              throw new WarrenError(
                'ADDRESS_UNAVAILABLE',
                `requested address ${formatIP(requested)} is outside the allocatable span ${formatIP({ family: range.family, value: range.first })}-${formatIP({ family: range.family, value: range.last })} of ${pool}`,
              );
            case 'excluded':
              throw new WarrenError('ADDRESS_UNAVAILABLE', `requested address ${formatIP(requested)} is excluded from ${pool}`);
            default: {
              const never: never = verdict;
              throw new Error(`unhandled verdict ${JSON.stringify(never)}`);
            }
          }
        } else {
          const pick = cached.state.pick(range);
          if (pick.kind === 'exhausted') {
            throw new WarrenError('POOL_EXHAUSTED', `pool ${pool} has no free address (${cached.state.allocatedCount} allocated, ${cached.state.restingCount} resting after release)`);
          }
          address = pick.address;
          ops.push({ op: 'cursor', address: formatIP({ family: range.family, value: address }) });
        }
        const allocation = this.#record(range, address, request, now);
        ops.push({ op: 'allocate', allocation });
        const description = describeRange(range, request.cooldownSeconds ?? 0);
        const descriptionText = JSON.stringify(description);
        if (cached.description !== descriptionText) ops.push({ op: 'describe', description });
        const result = await this.#store.commit(pool, cached.revision, ops);
        if (result.kind === 'conflict') {
          this.#pools.delete(pool);
          continue;
        }
        cached.revision = result.revision;
        cached.state.markAllocated(address);
        if (requested === undefined) cached.state.cursor = address;
        cached.description = descriptionText;
        return { range, allocation, fresh: true };
      }
      throw new WarrenError('TRY_AGAIN', `pool ${pool} kept changing under ${this.#maxAttempts} attempts to allocate; try again`);
    });
  }

  #record(range: RangeSpec, address: bigint, request: AllocateRequest, now: number): Allocation {
    const a: { -readonly [K in keyof Allocation]: Allocation[K] } = {
      pool: range.pool,
      address: formatIP({ family: range.family, value: address }),
      network: request.owner.network,
      containerID: request.owner.containerID,
      ifname: request.owner.ifname,
      node: this.#node,
      createdAt: now,
    };
    if (request.podNamespace !== undefined) a.podNamespace = request.podNamespace;
    if (request.podName !== undefined) a.podName = request.podName;
    if (request.podUID !== undefined) a.podUID = request.podUID;
    if (request.netns !== undefined) a.netns = request.netns;
    return a;
  }

  async #load(pool: string): Promise<CachedPool> {
    const cached = this.#pools.get(pool);
    const read = await this.#store.readPool(pool, cached?.revision);
    if (read.kind === 'unchanged' && cached !== undefined) return cached;
    if (read.kind === 'unchanged') throw new Error(`store answered unchanged for uncached pool ${pool}`);
    const fresh: CachedPool = { revision: read.revision, state: stateFrom(read) };
    this.#pools.set(pool, fresh);
    return fresh;
  }

  /**
   * Releases every address an owner holds (ifname undefined: every interface). Returns what was
   * released; releasing an owner that holds nothing returns [].
   */
  async release(owner: Omit<Owner, 'ifname'> & { ifname?: string }, cooldownSeconds?: number): Promise<Allocation[]> {
    const held = await this.#store.findByOwner(owner);
    const pools = new Set(held.map((a) => a.pool));
    const released: Allocation[] = [];
    for (const pool of pools) {
      released.push(...(await this.#releaseOwnerIn(pool, owner, cooldownSeconds)));
    }
    return released;
  }

  async #releaseOwnerIn(pool: string, owner: Omit<Owner, 'ifname'> & { ifname?: string }, cooldownSeconds?: number): Promise<Allocation[]> {
    return this.#locks.run(pool, async () => {
      for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
        // Re-read inside the lock: between the caller's look-up and now the address may have moved.
        const mine = (await this.#store.findByOwner(owner)).filter((a) => a.pool === pool);
        if (mine.length === 0) return [];
        const result = await this.#commitRelease(pool, mine.map((a) => a.address), cooldownSeconds);
        if (result) return mine;
      }
      throw new WarrenError('TRY_AGAIN', `pool ${pool} kept changing under ${this.#maxAttempts} attempts to release; try again`);
    });
  }

  /** Releases specific addresses of a pool, whoever holds them. */
  async releaseAddresses(pool: string, addresses: readonly string[], cooldownSeconds?: number): Promise<Allocation[]> {
    return this.#locks.run(pool, async () => {
      for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
        const wanted = new Set(addresses);
        const held = (await this.#store.list({ pool })).filter((a) => wanted.has(a.address));
        if (held.length === 0) return [];
        if (await this.#commitRelease(pool, held.map((a) => a.address), cooldownSeconds)) return held;
      }
      throw new WarrenError('TRY_AGAIN', `pool ${pool} kept changing under ${this.#maxAttempts} attempts to release; try again`);
    });
  }


  /** One release round inside the pool lock; false on a revision conflict. */
  async #commitRelease(pool: string, addresses: readonly string[], cooldownSeconds?: number): Promise<boolean> {
    const cached = await this.#load(pool);
    const now = this.#clock.now();
    const seconds = cooldownSeconds ?? (await this.#describedCooldown(pool));
    const reusableAt = seconds > 0 ? now + seconds * 1000 : undefined;
    const ops: PoolOp[] = addresses.map((address) => (reusableAt === undefined ? { op: 'release', address } : { op: 'release', address, reusableAt }));
    const result = await this.#store.commit(pool, cached.revision, ops);
    if (result.kind === 'conflict') {
      this.#pools.delete(pool);
      return false;
    }
    cached.revision = result.revision;
    for (const text of addresses) {
      const ip = parseIP(text);
      if (ip !== undefined) cached.state.markReleased(ip.value, reusableAt, now);
    }
    return true;
  }

  async #describedCooldown(pool: string): Promise<number> {
    const summary = (await this.#store.pools()).find((p) => p.pool === pool);
    return summary?.description?.cooldownSeconds ?? 0;
  }

  /**
   * CNI GC: releases every allocation of `network` whose (containerID, ifname) is not in `valid`.
   * Keeps going past errors and reports them.
   */
  async gc(network: string, valid: ReadonlySet<string>, cooldownSeconds?: number): Promise<GcOutcome> {
    const stale = (await this.#store.list({ network })).filter((a) => !valid.has(attachmentKey(a.containerID, a.ifname)));
    const released: Allocation[] = [];
    const errors: string[] = [];
    const owners = new Map<string, Owner>();
    for (const a of stale) owners.set(attachmentKey(a.containerID, a.ifname), { network, containerID: a.containerID, ifname: a.ifname });
    for (const owner of owners.values()) {
      try {
        released.push(...(await this.release(owner, cooldownSeconds)));
      } catch (error) {
        errors.push(`${owner.containerID}/${owner.ifname}: ${messageOf(error)}`);
      }
    }
    return { released, errors };
  }
}

export function attachmentKey(containerID: string, ifname: string): string {
  return JSON.stringify([containerID, ifname]);
}

function stateFrom(snapshot: PoolSnapshot): PoolState {
  const state = new PoolState();
  for (const text of snapshot.allocations) {
    const ip = parseIP(text);
    if (ip !== undefined) state.occupied.add(ip.value);
  }
  for (const r of snapshot.resting) {
    const ip = parseIP(r.address);
    // A rest that is already over is dropped at the next allocation (expireRests).
    if (ip !== undefined) state.markReleased(ip.value, r.reusableAt, Number.NEGATIVE_INFINITY);
  }
  if (snapshot.cursor !== undefined) state.cursor = parseIP(snapshot.cursor)?.value;
  return state;
}

function describeRange(range: RangeSpec, cooldownSeconds: number): PoolDescription {
  return {
    subnet: range.subnet,
    first: formatIP({ family: range.family, value: range.first }),
    last: formatIP({ family: range.family, value: range.last }),
    capacity: String(capacityOf(range)),
    cooldownSeconds,
  };
}

/** Assigns each requested address to the one range that can hold it. */
function matchRequested(ranges: readonly RangeSpec[], requested: readonly IPAddress[]): Map<RangeSpec, IPAddress> {
  const out = new Map<RangeSpec, IPAddress>();
  for (const ip of requested) {
    const range = ranges.find((r) => r.family === ip.family && inSubnet(r, ip));
    if (range === undefined) {
      throw new WarrenError('ADDRESS_UNAVAILABLE', `requested address ${formatIP(ip)} is in none of the configured ranges (${ranges.map((r) => r.subnet).join(', ')})`);
    }
    if (out.has(range)) throw new WarrenError('ADDRESS_UNAVAILABLE', `two requested addresses fall in range ${range.subnet}; one per range is allowed`);
    out.set(range, ip);
  }
  return out;
}
