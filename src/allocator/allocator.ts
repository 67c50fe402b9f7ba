/**
 * The allocator: turns the engine's decisions (ipam/ledger-state.ts) into store commits. This file
 * is the façade and wires the parts: one commit loop (commit-loop.ts), the usual path of an ADD in
 * one range (range-allocator.ts), one round per ledger (ledger-assigner.ts), blocks with node
 * affinity (block-assigner.ts, placement.ts), one release path (release.ts), the GC rule (gc.ts),
 * give-back (give-back.ts) and node forget (forget-node.ts).
 *
 * It owns the flow of every ADD: each range by the usual path, or, for a request naming a holding,
 * as the holdings plan it (holdings/holdings.ts): the held address, or a placeholder it allocates
 * itself by the usual path and the holdings then make held. An ADD without a holding never enters
 * the holdings' code.
 *
 * Every write is optimistic: decide on a picture at a revision, commit at that revision, and on a
 * conflict decide again. Per ledger, and per address space for allocations, this process never
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
import { defined } from '../core/defined.ts';
import { KeyedMutex } from '../core/keyed-mutex.ts';
import type { IPAddress } from '../ipam/address.ts';
import type { Allocation, Owner } from '../ipam/allocation.ts';
import type { RangeSpec } from '../ipam/range.ts';
import { type ReservedAddresses, withReservations } from '../ipam/reserved.ts';
import type { Store } from '../store/store.ts';
import { OverlapAdmission } from './admission.ts';
import { type AllocateRequest, type Assignment, matchRequested } from './assignment.ts';
import { BlockAssigner } from './block-assigner.ts';
import { Exhaustion } from './exhaustion.ts';
import { type ForgottenNode, forgetNode } from './forget-node.ts';
import { type GcOutcome, type RuntimeOf, gcCandidates, gcScope, releaseEach } from './gc.ts';
import { type BlockReturn, EmptyBlockGiveBack } from './give-back.ts';
import { Holdings } from './holdings/holdings.ts';
import { type LendGraces, Lending, type LendingReport } from './lending/lending.ts';
import { OwnBlocks } from './own-blocks.ts';
import { LedgerAssigner } from './ledger-assigner.ts';
import { LedgerCache } from './ledger-cache.ts';
import { LedgerMetadata } from './ledger-metadata.ts';
import { RangeAllocator } from './range-allocator.ts';
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
  /**
   * The random moment a lender waits before answering a request it was told of, ms (default
   * 0 to JITTER_MS, lending/prompt-lending.ts): a harness seeds it for an outcome that repeats.
   */
  readonly lendJitter?: () => number;
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
  /** Null when ranges are not split into blocks: then every range is one ledger (GC, give-back). */
  readonly #blocks: BlockAssigner | null;
  /** One decision per pool and per address space at a time; shared by every part that writes. */
  readonly #locks = new KeyedMutex();
  /** The round in one ledger, for ranges without blocks (BlockAssigner has it too); syncs every ADD. */
  readonly #assigner: LedgerAssigner;
  /** The usual path of an ADD in one range: admission, rounds, waits for other nodes, exhaustion. */
  readonly #ranges: RangeAllocator;
  /** The one release path, used by release, releaseAddresses, GC, rollback and forget. */
  readonly #releaser: Releaser;
  /** Holds since when each own block has been empty, across calls of returnEmptyBlocks. */
  readonly #giveBack: EmptyBlockGiveBack;
  /** The pool pictures every part shares; kept here for node forget, which has no part of its own. */
  readonly #ledgers: LedgerCache;
  /** Which boot is running now: release limits order moments by it (core/moment.ts). */
  readonly #clock: Clock;
  /** Lending addresses between nodes: on a two-tier store with blocks only. */
  readonly #lending: Lending | undefined;
  /** Addresses held for holders other than one pod (holdings/holdings.ts); refused without a cluster keeping them. */
  readonly holdings: Holdings;

  constructor(options: AllocatorOptions) {
    const { store, clock, node } = options;
    const blocks = options.blocks ?? false;
    this.#store = store;
    this.#node = node;
    this.#clock = clock;
    this.#maxAttempts = options.maxAttempts ?? (blocks ? 32 : 8);
    const ledgers = new LedgerCache(store, clock);
    const metadata = new LedgerMetadata();
    const own = new OwnBlocks();
    const maxAttempts = this.#maxAttempts;
    // The cached picture is trusted when this process writes the pool alone (its own SQLite file) or
    // owns it (blocks): a picture gone stale only costs a conflict and a fresh read, never a wrong
    // commit, because the commit checks the revision.
    this.#assigner = new LedgerAssigner({
      store,
      clock,
      node,
      ledgers,
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
            ledgers,
            assigner: this.#assigner,
            locks: this.#locks,
            // What this process served and how many ADDs wait, as the range allocator knows them.
            rangeOf: (pool) => withReservations(this.#ranges.served(pool), options.reserved),
            demand: (pool) => this.#ranges.demand(pool),
            underWay: (pool) => this.#ranges.underWay(pool),
            // Another node asking for room gets this node's empty blocks at once (give-back.ts).
            giveBack: (pool, wanted) => this.#giveBack.forRequest(pool, wanted),
            ...defined({ waitMs: options.lendWaitMs, jitter: options.lendJitter }),
          })
        : undefined;
    const lending = this.#lending;
    const [records, where] = [cluster?.holdings, cluster?.records.description ?? store.description];
    this.holdings = new Holdings({ store, records, where, node, clock, ledgers, locks: this.#locks });
    const parts = { ledgers, metadata, own, assigner: this.#assigner, lending, holdings: this.holdings };
    this.#blocks = blocks
      ? new BlockAssigner({ store, node, maxAttempts, ...parts, demand: (pool) => this.#ranges.demand(pool) })
      : null;
    this.#releaser = new Releaser({ store, clock, maxAttempts, ledgers, locks: this.#locks });
    this.#giveBack = new EmptyBlockGiveBack({ store, clock, node, ledgers, own, locks: this.#locks });
    this.#ledgers = ledgers;
    this.#ranges = new RangeAllocator({
      store,
      clock,
      maxAttempts,
      locks: this.#locks,
      // Remembers which ranges passed the overlap check, so it runs once per range, not per ADD; on a
      // shared store, with the guard that keeps that admission honest across agents.
      admission: new OverlapAdmission(store, maxAttempts),
      blocks: this.#blocks,
      assigner: this.#assigner,
      // The refusal of an ADD whose range is full, naming what fills it (here and across the cluster).
      exhaustion: new Exhaustion({ store, node, clock, reserved: options.reserved }),
      ledgers,
      settled: (pool) => this.#lending?.settled(pool),
    });
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
      for (const range of request.ranges) done.push(await this.#allocateIn(range, request, wanted.get(range)));
      await this.#assigner.synced(); // nothing is answered before it is durable (ledger-assigner.ts)
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

  /**
   * One range of an ADD. Without a holding, the usual path (range-allocator.ts); with one, as the
   * holdings plan it (holdings/holder-plan.ts): the held address, or a placeholder this allocator
   * allocates by the usual path and the holdings then make held. The placeholder is the holding's,
   * never the pod's: an ADD failing in a later range releases the pod's use, not the holding.
   */
  async #allocateIn(range: RangeSpec, request: AllocateRequest, requested: IPAddress | undefined): Promise<Assignment> {
    const key = request.holding;
    if (key === undefined) return this.#ranges.allocate(range, request, requested);
    const plan = await this.holdings.plan(key, range, request, requested);
    switch (plan.kind) {
      case 'held':
        return plan.assignment;
      case 'make':
        return this.holdings.adopt(plan.add, await this.#ranges.allocate(range, plan.placeholder, requested));
      default: {
        const never: never = plan;
        throw new Error(`unhandled holding plan ${JSON.stringify(never)}`);
      }
    }
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
        (await this.#store.list(storePool === undefined ? { rangePool: pool } : { ledger: storePool })).filter((a) =>
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
  async lend(o: LendGraces): Promise<LendingReport> {
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
        ledgers: this.#ledgers,
        releaseAddresses: (pool, addresses) => this.releaseAddresses(pool, addresses),
      },
      node,
    );
  }
}
