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
import { type IPAddress, formatCidr, formatIP, parseIP } from '../ipam/address.ts';
import { parsePoolKey, poolsOverlap } from '../ipam/pool-key.ts';
import type { Allocation, Owner } from '../ipam/allocation.ts';
import { type RangeSpec, capacityOf, inSubnet } from '../ipam/config.ts';
import { type Block, blockAt, blockCapacity, blockOfKey, firstUnclaimedBlock } from '../ipam/blocks.ts';
import { PoolState } from '../ipam/pool-state.ts';
import { type PoolDescription, type PoolOp, type PoolSnapshot, type Revision, type Store, rangePoolOf } from './store.ts';

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
  /** Decide-and-commit rounds before giving up with TRY_AGAIN. Default 8, 32 with blocks. */
  readonly maxAttempts?: number;
  /**
   * Split ranges into blocks with node affinity (cluster stores): this node allocates inside
   * blocks it claimed, claims a free block when they are full, and borrows from other nodes'
   * blocks when no block is free.
   */
  readonly blocks?: boolean;
}

type Decision = { readonly kind: 'done'; readonly assignment: Assignment } | { readonly kind: 'full' } | { readonly kind: 'conflict' };

export interface BlockReturn {
  readonly returned: string[];
  readonly errors: string[];
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
  readonly #blocks: boolean;
  /** Per range pool: keys of the blocks this node has claimed, as last seen. */
  readonly #mine = new Map<string, string[]>();
  /** Range pools whose block size has been checked against the store, and that size. */
  readonly #blockPrefixChecked = new Map<string, number>();
  /** Own blocks seen empty, and since when (milliseconds). */
  readonly #emptySince = new Map<string, number>();
  /** Range pools checked against the overlapping ranges of their network_name (see #admit). */
  readonly #admitted = new Set<string>();

  constructor(options: AllocatorOptions) {
    this.#store = options.store;
    this.#clock = options.clock;
    this.#node = options.node;
    this.#blocks = options.blocks ?? false;
    this.#maxAttempts = options.maxAttempts ?? (this.#blocks ? 32 : 8);
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
    // Ranges of one network_name and family may overlap across configs: allocations in them are
    // decided one at a time here, so an overlap admitted below cannot race an allocation.
    return this.#locks.run(addressSpaceOf(range), () => this.#locks.run(range.pool, async () => {
      await this.#admit(range);
      for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
        // With blocks the first round skips the owner look-up: the commit itself refuses a second
        // address for one owner (the store's owner-per-pool rule), and a retried ADD lands here
        // on the second round, where the look-up finds what it holds.
        const held = this.#blocks && attempt === 1 ? undefined : (await this.#store.findByOwner(request.owner)).find((a) => rangePoolOf(a.pool) === range.pool);
        if (held !== undefined) {
          if (requested !== undefined && held.address !== formatIP(requested)) {
            throw new WarrenError(
              'ADDRESS_UNAVAILABLE',
              `container ${request.owner.containerID} (${request.owner.ifname}) already holds ${held.address} in ${range.pool}, not the requested ${formatIP(requested)}`,
            );
          }
          return { range, allocation: held, fresh: false };
        }
        const decision = this.#blocks ? await this.#decideInBlocks(range, request, requested) : await this.#decide(range, range, request, requested);
        if (decision.kind === 'done') return decision.assignment;
        if (decision.kind === 'full') throw await this.#exhausted(range);
      }
      throw new WarrenError('TRY_AGAIN', `pool ${range.pool} kept changing under ${this.#maxAttempts} attempts to allocate; try again`);
    }));
  }

  /**
   * An address is unique within a network_name whatever the ranges of its configs say. Pools are
   * keyed by subnet, so two configs of one network_name whose ranges overlap differently (a /25
   * inside a /24) would each hand out the shared addresses: such a range is refused (CNI 7) while
   * the other holds any address, naming both. Checked when this process first allocates in a range
   * and again after it admitted an overlapping one; runs under the address-space lock.
   */
  async #admit(range: RangeSpec): Promise<void> {
    if (this.#admitted.has(range.pool)) return;
    const me = parsePoolKey(range.pool);
    if (me === undefined) return;
    const inUse = new Map<string, number>();
    for (const p of await this.#store.pools()) {
      const key = rangePoolOf(p.pool);
      inUse.set(key, (inUse.get(key) ?? 0) + p.allocated + p.resting);
    }
    for (const [key, count] of inUse) {
      const other = parsePoolKey(key);
      if (key === range.pool || count === 0 || other === undefined || !poolsOverlap(me, other)) continue;
      const name = me.networkName === '' ? 'no network_name' : `network_name "${me.networkName}"`;
      throw new WarrenError(
        'INVALID_CONFIG',
        `range ${range.subnet} overlaps range ${formatCidr(other.family, other.network, other.prefixLength)}, which holds ${count} addresses (both ${name}); ` +
          'an address must be unique within a network_name, so use the same range in every config of this network_name, give one of them its own network_name, or release the other range first',
      );
    }
    // Overlapping ranges admitted earlier are checked again before their next allocation.
    for (const key of this.#admitted) {
      const other = parsePoolKey(key);
      if (other !== undefined && poolsOverlap(me, other)) this.#admitted.delete(key);
    }
    this.#admitted.add(range.pool);
  }

  /**
   * One decide-and-commit round in one store pool: `span` is the range or one of its blocks (its
   * `pool` is the store key), `range` what the caller configured.
   */
  async #decide(span: RangeSpec, range: RangeSpec, request: AllocateRequest, requested: IPAddress | undefined): Promise<Decision> {
    const pool = span.pool;
    // With blocks a node is nearly always the only writer of its blocks, so the cached picture is
    // used without a read and the commit's revision check catches the rare change; a block that
    // looks full from the cache is read again before it is called full.
    let cached = await this.#load(pool, this.#blocks && requested === undefined);
    if (this.#blocks && requested === undefined && cached.state.pick(span).kind === 'exhausted') cached = await this.#load(pool, false);
    const now = this.#clock.now();
    const ops: PoolOp[] = cached.state.expireRests(now).map((a) => ({ op: 'unrest', address: formatIP({ family: range.family, value: a }) }));
    let address: bigint;
    if (requested !== undefined) {
      address = requested.value;
      const verdict = cached.state.checkRequest(span, address);
      switch (verdict.kind) {
        case 'free':
        case 'resting': // an explicit request overrides the cooldown: the operator asked for this address
          break;
        case 'occupied':
          throw new WarrenError('ADDRESS_UNAVAILABLE', `requested address ${formatIP(requested)} is already allocated in ${range.pool}`);
        case 'outside':
          throw new WarrenError(
            'ADDRESS_UNAVAILABLE',
            `requested address ${formatIP(requested)} is outside the allocatable span ${formatIP({ family: range.family, value: range.first })}-${formatIP({ family: range.family, value: range.last })} of ${range.pool}`,
          );
        case 'excluded':
          if (range.gateway !== undefined && range.gateway.value === address) {
            throw new WarrenError('ADDRESS_UNAVAILABLE', `requested address ${formatIP(requested)} is the gateway of ${range.pool}; it is never handed to a container`);
          }
          throw new WarrenError('ADDRESS_UNAVAILABLE', `requested address ${formatIP(requested)} is excluded from ${range.pool}`);
        default: {
          const never: never = verdict;
          throw new Error(`unhandled verdict ${JSON.stringify(never)}`);
        }
      }
    } else {
      const pick = cached.state.pick(span);
      if (pick.kind === 'exhausted') return { kind: 'full' };
      address = pick.address;
      ops.push({ op: 'cursor', address: formatIP({ family: range.family, value: address }) });
    }
    const allocation = this.#record(span, address, request, now);
    ops.push({ op: 'allocate', allocation });
    const description = describeRange(span, request.cooldownSeconds ?? 0);
    const descriptionText = JSON.stringify(description);
    if (cached.description !== descriptionText) ops.push({ op: 'describe', description });
    const result = await this.#store.commit(pool, cached.revision, ops);
    if (result.kind === 'conflict') {
      this.#pools.delete(pool);
      return { kind: 'conflict' };
    }
    cached.revision = result.revision;
    cached.state.markAllocated(address);
    if (requested === undefined) cached.state.cursor = address;
    cached.description = descriptionText;
    return { kind: 'done', assignment: { range, allocation, fresh: true } };
  }

  /**
   * One round in block mode: a requested address goes to whichever block holds it; otherwise own
   * blocks first, then a newly claimed free block, then a borrowed address in another node's block.
   */
  async #decideInBlocks(range: RangeSpec, request: AllocateRequest, requested: IPAddress | undefined): Promise<Decision> {
    await this.#checkBlockPrefix(range);
    if (requested !== undefined) {
      if (requested.value < range.first || requested.value > range.last) return this.#decide(range, range, request, requested); // reports "outside"
      return this.#decide(blockAt(range, requested.value).span, range, request, requested);
    }
    const owned = this.#mine.get(range.pool) ?? (await this.#refreshMine(range));
    for (const key of owned) {
      const block = blockOfKey(range, key);
      if (block === undefined) continue;
      const decision = await this.#decide(block.span, range, request, undefined);
      if (decision.kind === 'full') continue;
      // The block that served is tried first next time, so full blocks are not read on every ADD.
      if (decision.kind === 'done' && owned[0] !== key) this.#mine.set(range.pool, [key, ...owned.filter((k) => k !== key)]);
      return decision;
    }
    // Own blocks are full (or there are none): look at the whole range again.
    const summaries = await this.#store.pools(`${range.pool}#`);
    const claimed: Block[] = [];
    const others: Array<{ block: Block; free: bigint }> = [];
    const mine: string[] = [];
    for (const summary of summaries) {
      const block = blockOfKey(range, summary.pool);
      if (block === undefined) continue;
      if (summary.affinity === undefined) continue;
      claimed.push(block);
      if (summary.affinity === this.#node) mine.push(block.key);
      else others.push({ block, free: blockCapacity(block) - BigInt(summary.allocated + summary.resting) });
    }
    const known = this.#mine.get(range.pool) ?? [];
    this.#mine.set(range.pool, mine);
    if (mine.some((key) => !known.includes(key))) return { kind: 'conflict' }; // a block of ours we did not know of: try it first
    const free = firstUnclaimedBlock(range, claimed);
    if (free !== undefined) {
      const summary = summaries.find((p) => p.pool === free.key);
      const claim = await this.#store.commit(free.key, summary?.revision ?? 0, [
        { op: 'claim', node: this.#node },
        { op: 'describe', description: describeRange(free.span, request.cooldownSeconds ?? 0) },
      ]);
      this.#pools.delete(free.key);
      if (claim.kind === 'committed') this.#mine.set(range.pool, [free.key, ...mine]);
      return { kind: 'conflict' }; // either way, decide again with the new picture
    }
    // No free block: borrow from the block of another node with the most room.
    others.sort((a, b) => (a.free > b.free ? -1 : a.free < b.free ? 1 : 0));
    for (const { block, free: room } of others) {
      if (room <= 0n) continue;
      const decision = await this.#decide(block.span, range, request, undefined);
      if (decision.kind !== 'full') return decision;
    }
    return { kind: 'full' };
  }

  async #refreshMine(range: RangeSpec): Promise<string[]> {
    const mine = (await this.#store.pools(`${range.pool}#`)).filter((p) => p.affinity === this.#node && blockOfKey(range, p.pool) !== undefined).map((p) => p.pool);
    this.#mine.set(range.pool, mine);
    return mine;
  }

  /**
   * The block size of a range is fixed when the range is first used in the store: two configs
   * that split one range differently would put one address in two blocks.
   */
  async #checkBlockPrefix(range: RangeSpec): Promise<void> {
    if (this.#blockPrefixChecked.get(range.pool) === range.blockPrefix) return;
    for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
      const summary = (await this.#store.pools(range.pool)).find((p) => p.pool === range.pool);
      const fixed = summary?.description?.blockPrefix;
      if (fixed !== undefined) {
        if (fixed !== range.blockPrefix) {
          throw new WarrenError('INVALID_CONFIG', `range ${range.pool} is split into /${fixed} blocks in the store; this config asks for block_size ${range.blockPrefix}`);
        }
        this.#blockPrefixChecked.set(range.pool, fixed);
        return;
      }
      const description: PoolDescription = { ...describeRange(range, 0), blockPrefix: range.blockPrefix };
      const result = await this.#store.commit(range.pool, summary?.revision ?? 0, [{ op: 'describe', description }]);
      if (result.kind === 'committed') {
        this.#blockPrefixChecked.set(range.pool, range.blockPrefix);
        return;
      }
    }
    throw new WarrenError('TRY_AGAIN', `pool ${range.pool} kept changing while its block size was recorded; try again`);
  }

  async #exhausted(range: RangeSpec): Promise<WarrenError> {
    const summaries = (await this.#store.pools(range.pool)).filter((p) => rangePoolOf(p.pool) === range.pool);
    const allocated = summaries.reduce((n, p) => n + p.allocated, 0);
    const resting = summaries.reduce((n, p) => n + p.resting, 0);
    return new WarrenError('POOL_EXHAUSTED', `pool ${range.pool} has no free address (${allocated} allocated, ${resting} resting after release)`);
  }

  /**
   * Gives back this node's blocks that have held no allocation for `graceMs`, so other nodes can
   * claim them. A block is given back with a compare-and-swap on the revision at which it was seen
   * empty: an allocation that lands meanwhile keeps it.
   */
  async returnEmptyBlocks(graceMs: number): Promise<BlockReturn> {
    const returned: string[] = [];
    const errors: string[] = [];
    if (!this.#blocks) return { returned, errors };
    const now = this.#clock.now();
    const mine = (await this.#store.pools()).filter((p) => p.affinity === this.#node && p.pool.includes('#'));
    const seen = new Set<string>();
    for (const summary of mine) {
      seen.add(summary.pool);
      if (summary.allocated > 0) {
        this.#emptySince.delete(summary.pool);
        continue;
      }
      const since = this.#emptySince.get(summary.pool);
      if (since === undefined) {
        this.#emptySince.set(summary.pool, now);
        if (graceMs > 0) continue;
      } else if (now - since < graceMs) {
        continue;
      }
      const rangePool = rangePoolOf(summary.pool);
      try {
        await this.#locks.run(rangePool, async () => {
          const result = await this.#store.commit(summary.pool, summary.revision, [{ op: 'unclaim' }]);
          this.#pools.delete(summary.pool);
          if (result.kind === 'committed') {
            returned.push(summary.pool);
            this.#emptySince.delete(summary.pool);
            const list = this.#mine.get(rangePool);
            if (list !== undefined) this.#mine.set(rangePool, list.filter((k) => k !== summary.pool));
          }
        });
      } catch (error) {
        errors.push(`${summary.pool}: ${messageOf(error)}`);
      }
    }
    for (const key of this.#emptySince.keys()) if (!seen.has(key)) this.#emptySince.delete(key);
    return { returned, errors };
  }

  /**
   * Frees everything a node that is gone for good held: its allocations are released and its
   * blocks lose their affinity (addresses other nodes borrowed in them stay allocated). The caller
   * makes sure the node is not alive.
   */
  async forgetNode(node: string): Promise<{ released: Allocation[]; blocks: string[] }> {
    const held = await this.#store.list({ node });
    const byPool = new Map<string, string[]>();
    for (const a of held) byPool.set(a.pool, [...(byPool.get(a.pool) ?? []), a.address]);
    const released: Allocation[] = [];
    for (const [pool, addresses] of byPool) released.push(...(await this.releaseAddresses(pool, addresses)));
    const blocks: string[] = [];
    for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
      const owned = (await this.#store.pools()).filter((p) => p.affinity === node);
      if (owned.length === 0) return { released, blocks };
      for (const p of owned) {
        const result = await this.#store.commit(p.pool, p.revision, [{ op: 'unclaim' }]);
        this.#pools.delete(p.pool);
        if (result.kind === 'committed') blocks.push(p.pool);
      }
    }
    throw new WarrenError('TRY_AGAIN', `the blocks of node ${node} kept changing while they were given back; try again`);
  }

  /** The record of a new allocation in `span` (the range or one of its blocks). */
  #record(span: RangeSpec, address: bigint, request: AllocateRequest, now: number): Allocation {
    const a: { -readonly [K in keyof Allocation]: Allocation[K] } = {
      pool: span.pool,
      address: formatIP({ family: span.family, value: address }),
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

  /** The pool's picture: the cached one if `trust`, else revalidated against the store. */
  async #load(pool: string, trust = false): Promise<CachedPool> {
    const cached = this.#pools.get(pool);
    if (trust && cached !== undefined) return cached;
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
  async release(owner: Omit<Owner, 'ifname'> & { ifname?: string }, cooldownSeconds?: number, only: ReleaseLimits = {}): Promise<Allocation[]> {
    const held = (await this.#store.findByOwner(owner)).filter((a) => within(a, only));
    const pools = new Set(held.map((a) => a.pool));
    const released: Allocation[] = [];
    for (const pool of pools) {
      released.push(...(await this.#releaseOwnerIn(pool, owner, cooldownSeconds, only)));
    }
    return released;
  }

  async #releaseOwnerIn(pool: string, owner: Omit<Owner, 'ifname'> & { ifname?: string }, cooldownSeconds: number | undefined, only: ReleaseLimits): Promise<Allocation[]> {
    return this.#locks.run(pool, async () => {
      for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
        // Re-read inside the lock: between the caller's look-up and now the address may have moved,
        // or been released and allocated again (which the limits then spare).
        const mine = (await this.#store.findByOwner(owner)).filter((a) => a.pool === pool && within(a, only));
        if (mine.length === 0) return [];
        const result = await this.#commitRelease(pool, mine.map((a) => a.address), cooldownSeconds);
        if (result) return mine;
      }
      throw new WarrenError('TRY_AGAIN', `pool ${pool} kept changing under ${this.#maxAttempts} attempts to release; try again`);
    });
  }

  /**
   * Releases specific addresses of a pool, whoever holds them. `pool` may be a range pool whose
   * addresses live in blocks: each address is released in the block that holds it.
   */
  async releaseAddresses(pool: string, addresses: readonly string[], cooldownSeconds?: number): Promise<Allocation[]> {
    const wanted = new Set(addresses);
    const units = new Set((await this.#store.list({ pool })).filter((a) => wanted.has(a.address)).map((a) => a.pool));
    const released: Allocation[] = [];
    for (const unit of units) released.push(...(await this.#releaseIn(unit, wanted, cooldownSeconds)));
    return released;
  }

  async #releaseIn(unit: string, wanted: ReadonlySet<string>, cooldownSeconds?: number): Promise<Allocation[]> {
    return this.#locks.run(unit, async () => {
      for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
        const held = (await this.#store.list({ pool: unit })).filter((a) => a.pool === unit && wanted.has(a.address));
        if (held.length === 0) return [];
        if (await this.#commitRelease(unit, held.map((a) => a.address), cooldownSeconds)) return held;
      }
      throw new WarrenError('TRY_AGAIN', `pool ${unit} kept changing under ${this.#maxAttempts} attempts to release; try again`);
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
    const summary = (await this.#store.pools(pool)).find((p) => p.pool === pool);
    return summary?.description?.cooldownSeconds ?? 0;
  }

  /**
   * CNI GC: releases every allocation of `network` whose (containerID, ifname) is not in `valid`
   * and that `only` allows (the caller spares allocations younger than the runtime's list can
   * know of). Keeps going past errors and reports them.
   */
  async gc(network: string, valid: ReadonlySet<string>, cooldownSeconds?: number, only: ReleaseLimits = {}): Promise<GcOutcome> {
    // The runtime's list is this node's attachments: on a shared store, other nodes' allocations
    // are not its to judge.
    const shared = this.#blocks || this.#store.membership !== undefined;
    const stale = (await this.#store.list(shared ? { network, node: this.#node } : { network })).filter(
      (a) => !valid.has(attachmentKey(a.containerID, a.ifname)) && within(a, only),
    );
    const released: Allocation[] = [];
    const errors: string[] = [];
    const owners = new Map<string, Owner>();
    for (const a of stale) owners.set(attachmentKey(a.containerID, a.ifname), { network, containerID: a.containerID, ifname: a.ifname });
    for (const owner of owners.values()) {
      try {
        released.push(...(await this.release(owner, cooldownSeconds, only)));
      } catch (error) {
        errors.push(`${owner.containerID}/${owner.ifname}: ${messageOf(error)}`);
      }
    }
    return { released, errors };
  }
}

/**
 * Which of an owner's allocations a release may take. An intent recorded at some instant (a
 * journaled DEL, a GC's list of valid attachments) speaks only for allocations made before it: the
 * same container and interface may have been ADDed again since, and that address is in use.
 */
export interface ReleaseLimits {
  /** Release only allocations created at or before this instant (ms since the epoch). */
  readonly createdAtOrBefore?: number;
}

function within(a: Allocation, only: ReleaseLimits): boolean {
  return only.createdAtOrBefore === undefined || a.createdAt <= only.createdAtOrBefore;
}

export function attachmentKey(containerID: string, ifname: string): string {
  return JSON.stringify([containerID, ifname]);
}

/** The lock of one address space: a network_name and an address family. */
function addressSpaceOf(range: RangeSpec): string {
  const at = range.pool.indexOf('@');
  return `space:v${range.family}:${at < 0 ? '' : range.pool.slice(at + 1)}`;
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
