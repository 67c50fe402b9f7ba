/**
 * The allocator: turns the engine's decisions (ipam/pool-state.ts) into store commits. This file
 * is the façade and wires the parts: one commit loop (commit-loop.ts), one round per store pool
 * (pool-assigner.ts), blocks with node affinity (block-assigner.ts, placement.ts), one release path
 * (release.ts), the GC rule (gc.ts), give-back (give-back.ts) and node forget (forget-node.ts).
 *
 * Every write is optimistic: decide on a picture at a revision, commit at that revision, and on a
 * conflict decide again. Per store pool, and per address space for allocations, this process never
 * runs two decisions at once (KeyedMutex), so in the single-writer case a conflict never happens
 * and the cached picture of a pool stays valid.
 *
 * Guarantees:
 * - allocate is idempotent per (network, containerID, ifname) and range: a retry returns the
 *   address already held, recorded in the network namespace the retry names (a container restarted
 *   in a new namespace without a DEL keeps its address, and the record follows it);
 * - an attachment over several ranges gets all of its addresses or none (what this call added is
 *   released again when a later range fails);
 * - releasing what is not allocated is a no-op;
 * - a store that keeps changing under a write ends it with TRY_AGAIN naming the pool, never a loop
 *   without end.
 */
import type { Clock } from '../core/clock.ts';
import { WarrenError } from '../core/errors.ts';
import { KeyedMutex } from '../core/keyed-mutex.ts';
import { type IPAddress, formatIP } from '../ipam/address.ts';
import type { Allocation, Owner } from '../ipam/allocation.ts';
import { rangePoolOfKey } from '../ipam/blocks.ts';
import type { RangeSpec } from '../ipam/range.ts';
import { type ReservedAddresses, withReservations } from '../ipam/reserved.ts';
import type { Store } from '../store/store.ts';
import { OverlapAdmission, addressSpaceOf } from './admission.ts';
import { type AllocateRequest, type Assignment, MAX_WAITS, Waiting, matchRequested } from './assignment.ts';
import { BlockAssigner } from './block-assigner.ts';
import { Exhaustion } from './exhaustion.ts';
import { CONFLICT, retryOnConflict } from './commit-loop.ts';
import { type ForgottenNode, forgetNode } from './forget-node.ts';
import { type GcOutcome, type RuntimeOf, gcCandidates, gcScope, releaseEach } from './gc.ts';
import { type BlockReturn, EmptyBlockGiveBack } from './give-back.ts';
import { Holdings } from './holdings/holdings.ts';
import { Lending, type LendingReport } from './lending/lending.ts';
import { OwnBlocks } from './own-blocks.ts';
import { PoolAssigner } from './pool-assigner.ts';
import { PoolCache } from './pool-cache.ts';
import { PoolMetadata } from './pool-metadata.ts';
import { type ReleaseLimits, Releaser, within } from './release.ts';

export type { AllocateRequest, Assignment } from './assignment.ts';
export type { BlockReturn } from './give-back.ts';
export type { LendingReport } from './lending/lending.ts';
export type { ReleaseLimits } from './release.ts';
export { attachmentKey, type GcOutcome, type RuntimeOf } from './gc.ts';

export interface AllocatorOptions {
  readonly store: Store;
  readonly clock: Clock;
  readonly node: string;
  /** Decide-and-commit rounds before giving up with TRY_AGAIN. Default 8, 32 with blocks. */
  readonly maxAttempts?: number;
  /**
   * Split ranges into blocks with node affinity (the two-tier store; refused on a store without
   * Store.cluster): this node allocates inside blocks it claimed, claims a free block when they
   * are full, and borrows from other nodes' blocks when no block is free.
   */
  readonly blocks?: boolean;
  /** How long an ADD waits for other nodes to lend it addresses (two-tier store; default 15 s). */
  readonly lendWaitMs?: number;
  /** Cluster-wide reservations (ipam/reserved.ts): never handed out; what is held stays held. */
  readonly reserved?: ReservedAddresses;
}

/** One owner, or with no `ifname` every interface of the container in the network (store.findByOwner). */
type OwnerSelector = Omit<Owner, 'ifname'> & { ifname?: string };

export class Allocator {
  /** Read directly for look-ups (held, GC's list, exhaustion figures); parts commit through it. */
  readonly #store: Store;
  /** This node: recorded in allocations, scopes GC on a shared store. */
  readonly #node: string;
  /** Rounds of every commit loop this allocator runs (allocation, release, forget). */
  readonly #maxAttempts: number;
  /** Null when ranges are not split into blocks: then every range is one store pool. */
  readonly #blocks: BlockAssigner | null;
  /** One decision per pool and per address space at a time; shared by every part that writes. */
  readonly #locks = new KeyedMutex();
  /**
   * Remembers which ranges passed the overlap check, so it runs once per range, not per ADD; on a
   * shared store, with the guard that keeps that admission honest across agents.
   */
  readonly #admission: OverlapAdmission;
  /** The round in one store pool, for ranges without blocks (BlockAssigner has it too). */
  readonly #assigner: PoolAssigner;
  /** The one release path, used by release, releaseAddresses, GC, rollback and forget. */
  readonly #releaser: Releaser;
  /** Holds since when each own block has been empty, across calls of returnEmptyBlocks. */
  readonly #giveBack: EmptyBlockGiveBack;
  /** The pool pictures every part shares; kept here for node forget, which has no part of its own. */
  readonly #pools: PoolCache;
  /** Which boot is running now: release limits order moments by it (core/moment.ts). */
  readonly #clock: Clock;
  /** Lending addresses between nodes: on a two-tier store with blocks only. */
  readonly #lending: Lending | undefined;
  /** The ranges this process served, by pool: what it lends from knows their exclusions. */
  readonly #served = new Map<string, RangeSpec>();
  /** ADDs under way per range pool: how many addresses a node with no room asks the others for. */
  readonly #inFlight = new Map<string, number>();
  /** The refusal of an ADD whose range is full, naming what fills it (here and across the cluster). */
  readonly #exhaustion: Exhaustion;
  /** Addresses held for holders other than one pod (holdings/holdings.ts); refused without a cluster keeping them. */
  readonly holdings: Holdings;

  constructor(options: AllocatorOptions) {
    const { store, clock, node } = options;
    const blocks = options.blocks ?? false;
    this.#store = store;
    this.#node = node;
    this.#clock = clock;
    this.#maxAttempts = options.maxAttempts ?? (blocks ? 32 : 8);
    const pools = new PoolCache(store, clock);
    const metadata = new PoolMetadata();
    const own = new OwnBlocks();
    const maxAttempts = this.#maxAttempts;
    this.#admission = new OverlapAdmission(store, maxAttempts);
    // The cached picture is trusted when this process writes the pool alone (its own SQLite file) or
    // owns it (blocks): a picture gone stale only costs a conflict and a fresh read, never a wrong
    // commit, because the commit checks the revision.
    this.#assigner = new PoolAssigner({
      store,
      clock,
      node,
      pools,
      metadata,
      trustCache: blocks || store.cluster === undefined,
      reserved: options.reserved,
    });
    const cluster = store.cluster;
    this.#lending =
      blocks && cluster !== undefined
        ? new Lending({
            store,
            tier: cluster.records,
            node,
            clock,
            pools,
            assigner: this.#assigner,
            locks: this.#locks,
            rangeOf: (pool) => withReservations(this.#served.get(pool), options.reserved),
            demand: (pool) => this.#inFlight.get(pool) ?? 1,
            ...(options.lendWaitMs === undefined ? {} : { waitMs: options.lendWaitMs }),
          })
        : undefined;
    const lending = this.#lending;
    const [records, where] = [cluster?.holdings, cluster?.records.description ?? store.description];
    this.holdings = new Holdings({ store, records, where, node, clock, pools, locks: this.#locks });
    const parts = { pools, metadata, own, assigner: this.#assigner, lending, holdings: this.holdings };
    this.#blocks = blocks ? new BlockAssigner({ store, node, maxAttempts, ...parts }) : null;
    this.#releaser = new Releaser({ store, clock, maxAttempts, pools, locks: this.#locks });
    this.#giveBack = new EmptyBlockGiveBack({ store, clock, node, pools, own, locks: this.#locks });
    this.#pools = pools;
    this.#exhaustion = new Exhaustion({ store, node, clock, reserved: options.reserved });
  }

  get node(): string {
    return this.#node;
  }

  /** Everything an owner holds, in every pool. */
  async held(owner: OwnerSelector): Promise<Allocation[]> {
    return this.#store.findByOwner(owner);
  }

  async allocate(request: AllocateRequest): Promise<Assignment[]> {
    const wanted = matchRequested(request.ranges, request.requested ?? []);
    const done: Assignment[] = [];
    try {
      for (const range of request.ranges) {
        const fresh = (r: AllocateRequest, ip?: IPAddress) => this.#allocateIn(range, r, ip);
        done.push(await this.holdings.allocate(range, request, wanted.get(range), fresh));
      }
      await this.#assigner.synced(); // nothing is answered before it is durable (pool-assigner.ts)
    } catch (error) {
      const added = done.filter((a) => a.fresh);
      for (const a of added) {
        await this.releaseAddresses(a.allocation.pool, [a.allocation.address], request.cooldownSeconds ?? 0).catch(
          () => undefined,
        );
      }
      throw error;
    }
    return done;
  }

  async #allocateIn(range: RangeSpec, request: AllocateRequest, requested: IPAddress | undefined): Promise<Assignment> {
    this.#served.set(range.pool, range);
    this.#inFlight.set(range.pool, (this.#inFlight.get(range.pool) ?? 0) + 1);
    try {
      return await this.#allocateInRange(range, request, requested);
    } finally {
      const left = (this.#inFlight.get(range.pool) ?? 1) - 1;
      if (left > 0) this.#inFlight.set(range.pool, left);
      else this.#inFlight.delete(range.pool);
    }
  }

  async #allocateInRange(
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
  ): Promise<Assignment> {
    let since: number | undefined; // when this ADD first waited: its waits share one deadline
    for (let waits = 0; ; waits++) {
      const outcome = await this.#roundsInRange(range, request, requested);
      if (!(outcome instanceof Waiting)) return outcome;
      // Waiting for other nodes (lending's grants) outside the range's locks, so the lending round
      // adopting grants of this range, and other ADDs, are not held up meanwhile; then decide again
      // under the locks (every commit is at the revision read: nothing is handed out twice).
      since ??= this.#clock.monotonic();
      if (waits >= MAX_WAITS || !(await outcome.until(since))) throw await this.#exhaustion.error(range);
    }
  }

  /** Rounds under the range's locks: the assignment, or what to wait for before deciding again. */
  async #roundsInRange(
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
  ): Promise<Assignment | Waiting> {
    // Ranges of one network_name and family may overlap across configs: allocations in them are
    // decided one at a time here, so an overlap admitted below cannot race an allocation.
    return this.#locks.run(addressSpaceOf(range), () =>
      this.#locks.run(range.pool, () =>
        retryOnConflict<Assignment | Waiting>(
          { subject: `pool ${range.pool}`, action: 'allocate' },
          this.#maxAttempts,
          async (attempt) => {
            // A look-up after the first round; admitted again only after a commit said another agent
            // retired this range's admission (admission.ts), which then refuses while that range holds.
            const guard = await this.#admission.admit(range);
            // With blocks the first round skips the owner look-up: the commit itself refuses a second
            // address for one owner (the store's owner-per-pool rule), and a retried ADD lands here
            // on the second round, where the look-up finds what it holds.
            const held =
              this.#blocks !== null && attempt === 1
                ? undefined
                : (await this.#store.findByOwner(request.owner)).find((a) => rangePoolOfKey(a.pool) === range.pool);
            if (held !== undefined) {
              if (requested !== undefined && held.address !== formatIP(requested)) {
                throw new WarrenError(
                  'ADDRESS_UNAVAILABLE',
                  `container ${request.owner.containerID} (${request.owner.ifname}) already holds ` +
                    `${held.address} in ${range.pool}, not the requested ${formatIP(requested)}`,
                );
              }
              // A re-ADD in another namespace (a container restarted without a DEL): the record must say
              // where the address lives now, or that namespace's removal would be taken for its end.
              if (request.netns !== undefined && held.netns !== request.netns) {
                const moved = await this.#relocate(held, request.netns);
                return moved === CONFLICT ? CONFLICT : { range, allocation: moved, fresh: false };
              }
              return { range, allocation: held, fresh: false };
            }
            const decision =
              this.#blocks !== null
                ? await this.#blocks.decide(range, request, requested, guard)
                : await this.#assigner.decide(range, range, request, requested, guard);
            switch (decision.kind) {
              case 'done':
                return decision.assignment;
              case 'full':
                throw await this.#exhaustion.error(range);
              case 'conflict':
                if (decision.admissionLost === true) this.#admission.forget(range.pool);
                return decision.wait === undefined ? CONFLICT : new Waiting(decision.wait);
              default: {
                const never: never = decision;
                throw new Error(`unhandled decision ${JSON.stringify(never)}`);
              }
            }
          },
        ),
      ),
    );
  }

  /** Records the namespace `held`'s owner lives in now; CONFLICT when the pool moved meanwhile. */
  async #relocate(held: Allocation, netns: string): Promise<Allocation | typeof CONFLICT> {
    const moved: Allocation = { ...held, netns };
    const picture = await this.#pools.load(held.pool);
    const result = await this.#store.commit(held.pool, picture.revision, [{ op: 'relocate', allocation: moved }]);
    if (result.kind === 'conflict') {
      this.#pools.forget(held.pool);
      return CONFLICT;
    }
    picture.revision = result.revision;
    return moved;
  }

  /**
   * Releases every address an owner holds (ifname undefined: every interface) that `only` allows.
   * Returns what was released; releasing an owner that holds nothing returns [].
   */
  async release(owner: OwnerSelector, cooldownSeconds?: number, only: ReleaseLimits = {}): Promise<Allocation[]> {
    return this.#releaser.release(
      async () =>
        (await this.#store.findByOwner(owner)).filter((a) => within(a, only, this.#clock.boot, this.#sharedBy())),
      cooldownSeconds,
    );
  }

  /**
   * Releases specific addresses of a pool, whoever holds them. `pool` may be a range pool whose
   * addresses live in blocks: each address is released in the block that holds it.
   */
  async releaseAddresses(pool: string, addresses: readonly string[], cooldownSeconds?: number): Promise<Allocation[]> {
    const wanted = new Set(addresses);
    return this.#releaser.release(
      async (storePool) =>
        (await this.#store.list(storePool === undefined ? { rangePool: pool } : { pool: storePool })).filter((a) =>
          wanted.has(a.address),
        ),
      cooldownSeconds,
    );
  }

  /**
   * CNI GC: releases every allocation of `network` that the GC rule (gc.ts) gives up: not in
   * `valid`, allowed by `only`, on a shared store this node's, and no registered adapter's
   * (`runtimeOf`). Keeps going past errors and reports them.
   */
  async gc(
    network: string,
    valid: ReadonlySet<string>,
    cooldownSeconds?: number,
    only: ReleaseLimits = {},
    runtimeOf?: RuntimeOf,
  ): Promise<GcOutcome> {
    const shared = this.#blocks !== null || this.#store.cluster !== undefined;
    const candidates = await this.#store.list(gcScope(network, this.#node, shared));
    const stale = gcCandidates(candidates, valid, only, this.#clock.boot, this.#sharedBy(), runtimeOf);
    return releaseEach(stale, (owner) => this.release(owner, cooldownSeconds, only));
  }

  /**
   * This node where several share the store (another node's stamps are another host's:
   * createdMoment), else undefined.
   */
  #sharedBy(): string | undefined {
    return this.#store.cluster === undefined ? undefined : this.#node;
  }

  /** Gives back this node's blocks that have held no allocation for `graceMs` (give-back.ts). */
  async returnEmptyBlocks(graceMs: number): Promise<BlockReturn> {
    if (this.#blocks === null) return { returned: [], errors: [] };
    return this.#giveBack.run(graceMs);
  }

  /** One round of lending (lending/lending.ts): answers requests, tidies placeholders, gives idle loans back. */
  async lend(o: { readonly returnGraceMs: number; readonly orphanGraceMs: number }): Promise<LendingReport> {
    return this.#lending?.run(o) ?? { lent: [], released: [], returned: [], adopted: 0, errors: [] };
  }

  /** Lends as requests change, until `signal` aborts (lending/prompt-lending.ts); false: the rounds alone. */
  lendPromptly(signal: AbortSignal, report: (lent: readonly string[], errors: readonly string[]) => void): boolean {
    return this.#lending?.promptly(signal, report) ?? false;
  }

  /** Frees everything a node that is gone for good held (forget-node.ts); its holdings orphaned first. */
  async forgetNode(node: string): Promise<ForgottenNode> {
    await this.holdings.orphan(node); // before its blocks are freed: a claim of one then holds them
    return forgetNode(
      {
        store: this.#store,
        pools: this.#pools,
        releaseAddresses: (pool, addresses) => this.releaseAddresses(pool, addresses),
      },
      node,
    );
  }
}
