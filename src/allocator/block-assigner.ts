/**
 * Allocation in a range split into blocks with node affinity, on the two-tier store (Store.cluster:
 * the cluster keeps who owns which block, each node the addresses of its own blocks); a store
 * without block owners is refused at construction. A requested address is handed out only by the
 * node holding its block (a block nobody holds is claimed first, one another node holds is refused
 * by name); otherwise this node's own blocks first, then the addresses others lent it, then what
 * block placement (placement.ts) decides over the range's blocks: claim a free block, borrow from
 * another node's, or report the range full.
 *
 * Also pins a range's block size in the store at first use: two configs that split one range
 * differently would put one address in two blocks, so a config that disagrees is refused.
 *
 * Claims are amortised: a range whose config sets no block_size pins, beside its smallest block, the
 * largest a node may claim (ipam/range.ts growthBlockPrefix: a /24 has /31 to /27), and a node
 * claims a block as large as what it needs now (`wantedBlockPrefix`): at least the ADDs under way in
 * the range (a burst of 30 on a fresh node claims one block of 32), and at least twice what its own
 * blocks hold, all full when it claims (a node that keeps filling its blocks gets larger ones, so
 * its claims grow geometrically: O(log n) claims for n addresses). A node that does not fill its
 * blocks keeps claiming the smallest, so a small range shared by many nodes is not handed out in
 * large pieces to nodes that do not use them. A range pinned before blocks grew keeps its one size.
 *
 * - a range whose config sets no block_size is split by its size (ipam/range.ts
 *   adaptiveBlockPrefix), and the size pinned in the store wins over that default (only a size the
 *   config set is refused when it disagrees);
 * - the first ADD of a range reads only this node's blocks (`pools(<range>#)` answers those); a
 *   claim in a range of more than a page of claims is placed by probing what this node knows
 *   (range-placer.ts: no other node's claim read, so first claims cost the same at any node count);
 *   the range's claims are read (cluster.owners.rangeBlocks) only when this node's blocks are full
 *   and probing found nothing (or the range is one page), and not when the range is marked fully
 *   claimed (cluster.owners.fullyClaimed: one request, where the cluster keeps the mark): a node
 *   whose reading finds no block free marks it, then reads once more (a give-back in between is
 *   seen, or takes the mark off after it), and one that finds one free takes it off;
 * - an address in another node's block is that node's to hand out: after its own blocks, a node
 *   tries the addresses others lent it (lending/, a local look), and the `borrow` placement asks the
 *   owners to lend some and waits for them (lending/borrower.ts); a claim holds the addresses a
 *   migration recorded in the block, and those held in it (holdings/), in the claim's own commit.
 */
import { WarrenError } from '../core/errors.ts';
import type { IPAddress } from '../ipam/address.ts';
import {
  type Block,
  blockCapacity,
  blockKeyPrefix,
  blockOfKey,
  blocksHolding,
  type RangeSplit,
  splitRange,
} from '../ipam/blocks.ts';
import { withReservations } from '../ipam/reserved.ts';
import { type RangeSpec, adaptiveBlockPrefix, capacityOf, growthBlockPrefix } from '../ipam/range.ts';
import type { AdmissionGuard, CommitResult, Revision, Store, StoreCluster } from '../store/store.ts';
import type { AllocateRequest, Decision } from './assignment.ts';
import { CONFLICT, retryOnConflict } from './commit-loop.ts';
import type { Holdings } from './holdings/holdings.ts';
import type { Lending } from './lending/lending.ts';
import { commitOptionsOf } from './lending/migrated.ts';
import type { OwnBlocks } from './own-blocks.ts';
import type { LedgerAssigner } from './ledger-assigner.ts';
import type { LedgerCache } from './ledger-cache.ts';
import { type LedgerMetadata, metadataOps } from './ledger-metadata.ts';
import { ownBlocks } from './placement.ts';
import { RangePlacer } from './range-placer.ts';

export { wantedBlockPrefix } from './placement.ts';

export interface BlockAssignerOptions {
  readonly store: Store;
  readonly node: string;
  readonly maxAttempts: number;
  readonly ledgers: LedgerCache;
  readonly metadata: LedgerMetadata;
  readonly own: OwnBlocks;
  readonly assigner: LedgerAssigner;
  /** Lending between nodes (lending/lending.ts); without it, a range whose blocks are all claimed is full here. */
  readonly lending?: Lending | undefined;
  /** Holdings (holdings/): a claim holds the addresses held in its block (their owner forgotten). */
  readonly holdings?: Holdings | undefined;
  /** ADDs under way in a range pool (at least 1): how large a block a claim asks for. */
  readonly demand?: ((rangePool: string) => number) | undefined;
}

export class BlockAssigner {
  /** The store, the shared caches and the round in one pool this applies placement through. */
  readonly #o: BlockAssignerOptions;
  /** The cluster's side of the store: who owns which block of a range, and the claims' records. */
  readonly #cluster: StoreCluster;
  /** Range pools whose block size this process has checked against the store, and that size. */
  readonly #pinned = new Map<string, RangeSplit>();
  /** Where a claim goes when this node's blocks are full: the range probed or read whole (range-placer.ts). */
  readonly #placer: RangePlacer;

  constructor(options: BlockAssignerOptions) {
    // Blocks need a cluster that keeps their owners apart from the addresses (the two-tier store):
    // on one store shared by every node, any node could hand out any block's addresses.
    const cluster = options.store.cluster;
    if (cluster === undefined)
      throw new Error(
        `store ${options.store.description} keeps no block owners (Store.cluster): ` +
          'ranges are split into blocks on the two-tier store only',
      );
    this.#o = options;
    this.#cluster = cluster;
    this.#placer = new RangePlacer({ ...options, owners: cluster.owners });
  }

  /**
   * One round: the caller holds the range pool's lock and retries on `conflict`; every allocation
   * commit carries `guard`, the range's admission.
   */
  async decide(
    configured: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
    guard?: AdmissionGuard,
  ): Promise<Decision> {
    const { own, assigner } = this.#o;
    const range = await this.#pinBlockSize(configured);
    if (requested !== undefined) {
      if (requested.value < range.first || requested.value > range.last)
        return assigner.decide(range, range, request, requested, guard); // reports "outside"
      const held = await this.#holdRequested(range, requested.value, request);
      return 'kind' in held ? held : assigner.decide(held.span, range, request, requested, guard);
    }
    const owned = own.get(range.pool) ?? (await this.#refreshOwn(range));
    for (const key of owned) {
      const block = blockOfKey(range, key);
      if (block === undefined) continue;
      const decision = await assigner.decide(block.span, range, request, undefined, guard);
      if (decision.kind === 'full') continue;
      if (decision.kind === 'done') own.promote(range.pool, key);
      // The store refuses allocations in a block whose claim vanished: look at the own blocks again
      // (its `pools` no longer shows that one as this node's), or the next round would retry it.
      if (decision.kind === 'conflict') await this.#refreshOwn(range);
      return decision;
    }
    // Then addresses other nodes lent this one: a local look, no request to the cluster.
    const loaned = await this.#o.lending?.fromLoans(range, request, guard);
    if (loaned !== undefined) return loaned;
    // Own blocks are full (or there are none): look at the whole range again, unless it is marked
    // fully claimed (one request, not a read of every claim): then borrow.
    const owners = this.#cluster.owners;
    if ((await owners.fullyClaimed?.(range.pool).catch(() => false)) === true)
      return this.#o.lending === undefined || this.#holdsAll(range) ? { kind: 'full' } : this.#o.lending.borrow(range);
    let placement = await this.#placer.place(range);
    if ((placement.kind === 'borrow' || placement.kind === 'full') && owners.markFullyClaimed !== undefined) {
      // Marked, then read once more: a block given back meanwhile is seen here, or its give-back
      // (after its deletion) sees the mark and takes it off (kubernetes/fully-claimed.ts).
      if (await owners.markFullyClaimed(range.pool, true).catch(() => false)) {
        placement = await this.#placer.place(range, true);
        if (placement.kind === 'claim' || placement.kind === 'own')
          await owners.markFullyClaimed(range.pool, false).catch(() => false);
      }
    }
    switch (placement.kind) {
      case 'own':
        return { kind: 'conflict' }; // decide again, trying the newly found blocks first
      case 'claim': {
        const { block, revision } = placement;
        const cooldownSeconds = request.cooldownSeconds ?? 0;
        const claim = await this.#claim(range, block, revision, cooldownSeconds);
        this.#placer.claimed(range.pool, block.key, claim.kind === 'committed'); // lost: look elsewhere
        // Either way, decide again with the new picture; admitting the range again first when the
        // claim found it no longer admitted (etcd's tier reads the admission in the claim's transaction).
        return claim.kind === 'conflict' && claim.admissionLost === true
          ? { kind: 'conflict', admissionLost: true }
          : { kind: 'conflict' };
      }
      case 'borrow':
        // Only the owner hands out addresses of its blocks (it alone holds them): ask the owners to
        // lend some (address requests), and wait for them.
        return this.#o.lending === undefined ? { kind: 'full' } : this.#o.lending.borrow(range);
      case 'full':
        return { kind: 'full' };
      default: {
        const never: never = placement;
        throw new Error(`unhandled placement ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * A requested address is handed out only by the node holding its block: a block nobody holds is
   * claimed first, the smallest that holds the address (then decide again); one held by another node
   * is refused by name, since only its owner may hand its addresses out (lent ones included).
   * Answers this node's block that holds the address. Reads one claim per block size of the range.
   */
  async #holdRequested(range: RangeSpec, address: bigint, request: AllocateRequest): Promise<Decision | Block> {
    const { store, node, own } = this.#o;
    const candidates = blocksHolding(range, address);
    const owned = own.get(range.pool) ?? (await this.#refreshOwn(range));
    const mine = candidates.find((b) => owned.includes(b.key));
    if (mine !== undefined) return mine;
    for (const candidate of candidates) {
      const claim = await this.#cluster.records.claimOf(candidate.key);
      if (claim?.node === node) {
        await this.#refreshOwn(range);
        return { kind: 'conflict' };
      }
      if (claim !== undefined) {
        throw new WarrenError(
          'ADDRESS_UNAVAILABLE',
          `the requested address is in block ${candidate.cidr} of ${range.pool}, held by node ${claim.node}: ` +
            'only the node holding a block hands out its addresses',
        );
      }
    }
    const block = candidates[0] as Block;
    const read = await store.readLedger(block.key);
    await this.#claim(range, block, read.revision, request.cooldownSeconds ?? 0);
    return { kind: 'conflict' };
  }

  /** Claims `block` for this node at `revision`, with what it must hold from the claim on. */
  async #claim(range: RangeSpec, block: Block, revision: Revision, cooldownSeconds: number): Promise<CommitResult> {
    const { store, node, own } = this.#o;
    const migrated = await this.#o.lending?.migratedIn(range, block);
    const claimed = await store.commit(
      block.key,
      revision,
      [
        { op: 'claim', node },
        ...metadataOps(block.span, cooldownSeconds),
        // Addresses a migration recorded in the block are held with the claim, in one commit (the
        // loan ledgers it takes them over from let go in its transaction), as are the addresses held
        // in it (holdings of a node forgotten).
        ...(migrated?.ops ?? []),
        ...((await this.#o.holdings?.claimOps(block.key)) ?? []),
      ],
      undefined,
      commitOptionsOf(migrated),
    );
    this.#o.ledgers.forget(block.key);
    if (claimed.kind === 'committed') {
      own.set(range.pool, [block.key, ...(own.get(range.pool) ?? [])]);
      this.#o.metadata.written(block.span);
      await this.#o.holdings?.adoptBlock(block.key).catch(() => undefined); // the upkeep adopts too
    }
    return claimed;
  }

  /** Whether this node's blocks, as last seen, are the whole range: nobody else has any to lend. */
  #holdsAll(range: RangeSpec): boolean {
    const reserved = withReservations(range, this.#o.assigner.reserved) ?? range;
    let held = 0n;
    for (const key of this.#o.own.get(range.pool) ?? []) {
      const block = blockOfKey(reserved, key);
      if (block !== undefined) held += blockCapacity(block);
    }
    return held >= capacityOf(reserved);
  }

  async #refreshOwn(range: RangeSpec): Promise<readonly string[]> {
    const mine = ownBlocks(range, this.#o.node, await this.#o.store.ledgers(blockKeyPrefix(range.pool)));
    this.#o.own.set(range.pool, mine);
    return mine;
  }

  /**
   * The block size of a range is fixed when the range is first used in the store, in the range
   * pool's description, with the largest size its blocks may grow to (none when the config sets
   * block_size); once this process has seen it agree, it does not look again. Answers the range as
   * split in the store.
   */
  async #pinBlockSize(configured: RangeSpec): Promise<RangeSpec> {
    const { store, maxAttempts } = this.#o;
    const adapts = configured.blockSizeSet !== true;
    const wanted = adapts ? adaptiveSplit(configured) : configured;
    const pinned = this.#pinned.get(configured.pool);
    if (pinned !== undefined && (adapts || pinned.blockPrefix === wanted.blockPrefix))
      return splitRange(wanted, pinned);
    let range = wanted;
    await retryOnConflict({ subject: `pool ${range.pool}`, action: 'record its block size' }, maxAttempts, async () => {
      const summary = (await store.ledgers(range.pool)).find((p) => p.ledger === range.pool);
      const fixed = summary?.description?.blockPrefix;
      if (fixed !== undefined) {
        // A size the store holds wins over the default this process would choose.
        if (fixed !== range.blockPrefix && adapts) range = { ...range, blockPrefix: fixed };
        if (fixed !== range.blockPrefix) {
          throw new WarrenError(
            'INVALID_CONFIG',
            `range ${range.pool} is split into /${fixed} blocks in the store; this config asks for ` +
              `block_size ${range.blockPrefix}`,
          );
        }
        // The largest block too is the store's: every node reads the same bounds (none: no growth).
        const split = { blockPrefix: fixed, largestBlockPrefix: summary?.description?.largestBlockPrefix };
        range = splitRange(range, split);
        this.#pinned.set(range.pool, split);
        return undefined;
      }
      const ops = metadataOps(range, 0, range.blockPrefix, range.largestBlockPrefix);
      const result = await store.commit(range.pool, summary?.revision ?? 0, ops);
      if (result.kind === 'conflict') return CONFLICT;
      this.#pinned.set(range.pool, { blockPrefix: range.blockPrefix, largestBlockPrefix: range.largestBlockPrefix });
      return undefined;
    });
    return range;
  }
}

/** A range whose config sets no block_size, split by its size (ipam/range.ts), its blocks growing where they may. */
function adaptiveSplit(configured: RangeSpec): RangeSpec {
  const { family, first, last } = configured;
  const blockPrefix = adaptiveBlockPrefix(family, first, last);
  return splitRange(configured, {
    blockPrefix,
    largestBlockPrefix: growthBlockPrefix(family, first, last, blockPrefix),
  });
}
