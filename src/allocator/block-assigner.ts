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
 * - a range whose config sets no block_size is split by its size (ipam/range.ts
 *   adaptiveBlockPrefix), and the size pinned in the store wins over that default (only a size the
 *   config set is refused when it disagrees);
 * - the first ADD of a range reads only this node's blocks (`pools(<range>#)` answers those); the
 *   range's claims are read (cluster.owners.rangeBlocks) only when this node's blocks are full;
 * - an address in another node's block is that node's to hand out: after its own blocks, a node
 *   tries the addresses others lent it (lending/, a local look), and the `borrow` placement asks the
 *   owners to lend some and waits for them (lending/borrower.ts); a claim holds the addresses a
 *   migration recorded in the block, and those held in it (holdings/), in the claim's own commit.
 */
import { WarrenError } from '../core/errors.ts';
import type { IPAddress } from '../ipam/address.ts';
import { type Block, blockAt, blockKeyPrefix, blockOfKey } from '../ipam/blocks.ts';
import { withReservations } from '../ipam/reserved.ts';
import { type RangeSpec, adaptiveBlockPrefix } from '../ipam/range.ts';
import type { AdmissionGuard, Store, StoreCluster } from '../store/store.ts';
import type { AllocateRequest, Decision } from './assignment.ts';
import { CONFLICT, retryOnConflict } from './commit-loop.ts';
import type { Holdings } from './holdings/holdings.ts';
import type { Lending } from './lending/lending.ts';
import type { OwnBlocks } from './own-blocks.ts';
import type { LedgerAssigner } from './ledger-assigner.ts';
import type { LedgerCache } from './ledger-cache.ts';
import { type LedgerMetadata, metadataOps } from './ledger-metadata.ts';
import { type Placement, ownBlocks, placeInBlocks } from './placement.ts';

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
}

export class BlockAssigner {
  /** The store, the shared caches and the round in one pool this applies placement through. */
  readonly #o: BlockAssignerOptions;
  /** The cluster's side of the store: who owns which block of a range, and the claims' records. */
  readonly #cluster: StoreCluster;
  /** Range pools whose block size this process has checked against the store, and that size. */
  readonly #pinned = new Map<string, number>();

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
    const { store, node, own, assigner } = this.#o;
    const range = await this.#pinBlockSize(configured);
    if (requested !== undefined) {
      if (requested.value < range.first || requested.value > range.last)
        return assigner.decide(range, range, request, requested, guard); // reports "outside"
      const block = blockAt(range, requested.value);
      const unheld = await this.#holdRequested(range, block, request);
      return unheld ?? assigner.decide(block.span, range, request, requested, guard);
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
    // Own blocks are full (or there are none): look at the whole range again.
    const summaries = await this.#cluster.owners.rangeBlocks(range.pool, { counts: false });
    // Placed with the reservations as exclusions: a block they hold back whole is never claimed
    // (it could hand nothing out); the blocks decided on are the range's own again.
    const placed = placeInBlocks({
      range: withReservations(range, assigner.reserved) ?? range,
      node,
      summaries,
      known: own.get(range.pool) ?? [],
    });
    const { mine } = placed;
    const placement = asRange(range, placed.placement);
    own.set(range.pool, mine);
    switch (placement.kind) {
      case 'own':
        return { kind: 'conflict' }; // decide again, trying the newly found blocks first
      case 'claim': {
        const { block, revision } = placement;
        const cooldownSeconds = request.cooldownSeconds ?? 0;
        const claim = await store.commit(block.key, revision, [
          { op: 'claim', node },
          ...metadataOps(block.span, cooldownSeconds),
          // Addresses a migration recorded in the block are held with the claim, in one commit,
          // as are the addresses held in it (holdings of a node forgotten).
          ...((await this.#o.lending?.migratedIn(range, block)) ?? []),
          ...((await this.#o.holdings?.claimOps(block.key)) ?? []),
        ]);
        this.#o.ledgers.forget(block.key);
        if (claim.kind === 'committed') {
          own.set(range.pool, [block.key, ...mine]);
          this.#o.metadata.written(block.span);
          await this.#o.holdings?.adoptBlock(block.key).catch(() => undefined); // the upkeep adopts too
        }
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
   * A requested address is handed out only by the node holding its block: a
   * block nobody holds is claimed first (then decide again); one held by another node is refused by
   * name, since only its owner may hand its addresses out (lent ones included). Undefined when the
   * block is this node's.
   */
  async #holdRequested(range: RangeSpec, block: Block, request: AllocateRequest): Promise<Decision | undefined> {
    const { store, node, own } = this.#o;
    if ((own.get(range.pool) ?? (await this.#refreshOwn(range))).includes(block.key)) return undefined;
    const claim = await this.#cluster.records.claimOf(block.key);
    if (claim?.node === node) {
      await this.#refreshOwn(range);
      return { kind: 'conflict' };
    }
    if (claim !== undefined) {
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `the requested address is in block ${block.cidr} of ${range.pool}, held by node ${claim.node}: ` +
          'only the node holding a block hands out its addresses',
      );
    }
    const read = await store.readLedger(block.key);
    const claimed = await store.commit(block.key, read.revision, [
      { op: 'claim', node },
      ...metadataOps(block.span, request.cooldownSeconds ?? 0),
      ...((await this.#o.lending?.migratedIn(range, block)) ?? []),
      ...((await this.#o.holdings?.claimOps(block.key)) ?? []),
    ]);
    this.#o.ledgers.forget(block.key);
    if (claimed.kind === 'committed') {
      own.set(range.pool, [block.key, ...(own.get(range.pool) ?? [])]);
      this.#o.metadata.written(block.span);
      await this.#o.holdings?.adoptBlock(block.key).catch(() => undefined); // the upkeep adopts too
    }
    return { kind: 'conflict' };
  }

  async #refreshOwn(range: RangeSpec): Promise<readonly string[]> {
    const mine = ownBlocks(range, this.#o.node, await this.#o.store.ledgers(blockKeyPrefix(range.pool)));
    this.#o.own.set(range.pool, mine);
    return mine;
  }

  /**
   * The block size of a range is fixed when the range is first used in the store, in the range
   * pool's description; once this process has seen it agree, it does not look again. Answers the
   * range as split in the store.
   */
  async #pinBlockSize(configured: RangeSpec): Promise<RangeSpec> {
    const { store, maxAttempts } = this.#o;
    const adapts = configured.blockSizeSet !== true;
    const wanted = adapts
      ? { ...configured, blockPrefix: adaptiveBlockPrefix(configured.family, configured.first, configured.last) }
      : configured;
    const pinned = this.#pinned.get(configured.pool);
    if (pinned === wanted.blockPrefix || (adapts && pinned !== undefined)) return { ...wanted, blockPrefix: pinned };
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
        this.#pinned.set(range.pool, fixed);
        return undefined;
      }
      const result = await store.commit(range.pool, summary?.revision ?? 0, metadataOps(range, 0, range.blockPrefix));
      if (result.kind === 'conflict') return CONFLICT;
      this.#pinned.set(range.pool, range.blockPrefix);
      return undefined;
    });
    return range;
  }
}

/** A placement's block as a block of `range` itself (placement saw it with reservations as exclusions). */
function asRange(range: RangeSpec, placement: Placement): Placement {
  if (placement.kind !== 'claim') return placement;
  const block = placement.block;
  return { ...placement, block: blockOfKey(range, block.key) ?? blockAt(range, block.span.first) };
}
