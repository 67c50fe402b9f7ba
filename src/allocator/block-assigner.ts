/**
 * Allocation in a range split into blocks with node affinity (cluster stores): a requested address
 * goes to whichever block holds it; otherwise this node's own blocks first, then what block
 * placement (placement.ts) decides over the store's summaries: claim a free block, borrow from
 * another node's, or report the range full.
 *
 * Also pins a range's block size in the store at first use: two configs that split one range
 * differently would put one address in two blocks, so a config that disagrees is refused.
 */
import { WarrenError } from '../core/errors.ts';
import type { IPAddress } from '../ipam/address.ts';
import { blockAt, blockKeyPrefix, blockOfKey } from '../ipam/blocks.ts';
import type { RangeSpec } from '../ipam/range.ts';
import type { AdmissionGuard, Store } from '../store/store.ts';
import type { AllocateRequest, Decision } from './assignment.ts';
import { CONFLICT, retryOnConflict } from './commit-loop.ts';
import type { OwnBlocks } from './own-blocks.ts';
import type { PoolAssigner } from './pool-assigner.ts';
import type { PoolCache } from './pool-cache.ts';
import { type PoolMetadata, metadataOps } from './pool-metadata.ts';
import { ownBlocks, placeInBlocks } from './placement.ts';

export interface BlockAssignerOptions {
  readonly store: Store;
  readonly node: string;
  readonly maxAttempts: number;
  readonly pools: PoolCache;
  readonly metadata: PoolMetadata;
  readonly own: OwnBlocks;
  readonly assigner: PoolAssigner;
}

export class BlockAssigner {
  /** The store, the shared caches and the round in one pool this applies placement through. */
  readonly #o: BlockAssignerOptions;
  /** Range pools whose block size this process has checked against the store, and that size. */
  readonly #pinned = new Map<string, number>();

  constructor(options: BlockAssignerOptions) {
    this.#o = options;
  }

  /**
   * One round: the caller holds the range pool's lock and retries on `conflict`; every allocation
   * commit carries `guard`, the range's admission.
   */
  async decide(
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
    guard?: AdmissionGuard,
  ): Promise<Decision> {
    const { store, node, own, assigner } = this.#o;
    await this.#pinBlockSize(range);
    if (requested !== undefined) {
      if (requested.value < range.first || requested.value > range.last)
        return assigner.decide(range, range, request, requested, guard); // reports "outside"
      return assigner.decide(blockAt(range, requested.value).span, range, request, requested, guard);
    }
    const owned = own.get(range.pool) ?? (await this.#refreshOwn(range));
    for (const key of owned) {
      const block = blockOfKey(range, key);
      if (block === undefined) continue;
      const decision = await assigner.decide(block.span, range, request, undefined, guard);
      if (decision.kind === 'full') continue;
      if (decision.kind === 'done') own.promote(range.pool, key);
      return decision;
    }
    // Own blocks are full (or there are none): look at the whole range again.
    const summaries = await store.pools(blockKeyPrefix(range.pool));
    const { mine, placement } = placeInBlocks({ range, node, summaries, known: own.get(range.pool) ?? [] });
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
        ]);
        this.#o.pools.forget(block.key);
        if (claim.kind === 'committed') {
          own.set(range.pool, [block.key, ...mine]);
          this.#o.metadata.written(block.span);
        }
        return { kind: 'conflict' }; // either way, decide again with the new picture
      }
      case 'borrow':
        for (const block of placement.from) {
          const decision = await assigner.decide(block.span, range, request, undefined, guard);
          if (decision.kind !== 'full') return decision;
        }
        return { kind: 'full' };
      case 'full':
        return { kind: 'full' };
      default: {
        const never: never = placement;
        throw new Error(`unhandled placement ${JSON.stringify(never)}`);
      }
    }
  }

  async #refreshOwn(range: RangeSpec): Promise<readonly string[]> {
    const mine = ownBlocks(range, this.#o.node, await this.#o.store.pools(blockKeyPrefix(range.pool)));
    this.#o.own.set(range.pool, mine);
    return mine;
  }

  /**
   * The block size of a range is fixed when the range is first used in the store, in the range
   * pool's description; once this process has seen it agree, it does not look again.
   */
  async #pinBlockSize(range: RangeSpec): Promise<void> {
    if (this.#pinned.get(range.pool) === range.blockPrefix) return;
    const { store, maxAttempts } = this.#o;
    await retryOnConflict({ subject: `pool ${range.pool}`, action: 'record its block size' }, maxAttempts, async () => {
      const summary = (await store.pools(range.pool)).find((p) => p.pool === range.pool);
      const fixed = summary?.description?.blockPrefix;
      if (fixed !== undefined) {
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
  }
}
