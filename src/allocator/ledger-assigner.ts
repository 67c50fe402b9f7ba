/**
 * One decide-and-commit round in one ledger: the engine (ipam/ledger-state.ts) picks the next
 * address or judges a requested one, and the store commits the allocation at the revision the
 * picture was read at. A conflict forgets the picture and is reported, not retried: the caller's
 * commit loop decides whether to go round again.
 *
 * The commit carries, with the allocation, the cursor move, the end of rests that are over, and
 * the pool's metadata when it is first used or its config changed (ledger-metadata.ts).
 *
 * The commit is asked to be durable later (CommitOptions.durableLater): the range's lock is let go
 * before the disk sync, so the ADDs queued behind it commit meanwhile and share one sync. Whoever
 * answers an allocation first awaits `synced()`, which resolves once every commit this assigner
 * made before the call is durable (and rejects, IO_FAILURE, when one could not be made so).
 */
import type { Clock } from '../core/clock.ts';
import { WarrenError } from '../core/errors.ts';
import { momentOf } from '../core/moment.ts';
import { type IPAddress, formatIP } from '../ipam/address.ts';
import type { RangeSpec } from '../ipam/range.ts';
import type { RequestCheck } from '../ipam/ledger-state.ts';
import { ReservedAddresses } from '../ipam/reserved.ts';
import type { AdmissionGuard, CommitOptions, LedgerOp, Store } from '../store/store.ts';
import { type AllocateRequest, type Decision, recordOf } from './assignment.ts';
import type { LedgerCache } from './ledger-cache.ts';
import type { LedgerMetadata } from './ledger-metadata.ts';

const DURABLE_LATER: CommitOptions = { durableLater: true };

export interface LedgerAssignerOptions {
  readonly store: Store;
  readonly clock: Clock;
  readonly node: string;
  readonly ledgers: LedgerCache;
  readonly metadata: LedgerMetadata;
  /**
   * Use the cached picture without a read (blocks: a node is nearly always the only writer of its
   * blocks, and the commit's revision check catches the rare change).
   */
  readonly trustCache: boolean;
  /** Cluster-wide reservations (ipam/reserved.ts): never picked, and refused when requested. */
  readonly reserved?: ReservedAddresses | undefined;
}

export class LedgerAssigner {
  /** Everything a round needs; the cache and metadata are shared with the other parts. */
  readonly #o: LedgerAssignerOptions;

  /** The durability of the latest commit answered before it was durable. */
  #unsynced: Promise<void> | undefined;

  constructor(options: LedgerAssignerOptions) {
    this.#o = options;
  }

  /** Resolves once every allocation this assigner committed so far is durable. */
  async synced(): Promise<void> {
    await this.#unsynced;
  }

  /** The reservations every round honours; block placement skips blocks they hold back whole. */
  get reserved(): ReservedAddresses | undefined {
    return this.#o.reserved;
  }

  /**
   * One round in the ledger `span.pool`: `span` is the range or one of its blocks, `range` what
   * the caller configured (its key names the pool in messages), `guard` the range's admission
   * (admission.ts) the commit carries.
   */
  async decide(
    span: RangeSpec,
    range: RangeSpec,
    request: AllocateRequest,
    requested: IPAddress | undefined,
    guard?: AdmissionGuard,
  ): Promise<Decision> {
    const { store, clock, ledgers, metadata } = this.#o;
    const pool = span.pool;
    const trust = this.#o.trustCache && requested === undefined;
    const reserved = this.#o.reserved;
    // What may not be picked: the exclusions, and the reservations inside the span (a look-up).
    const blocked = reserved?.blocking(span);
    // A block that looks full from the cache is read again before it is called full.
    let picture = await ledgers.load(pool, trust);
    if (trust && picture.state.pick(span, blocked).kind === 'exhausted') picture = await ledgers.load(pool, false);
    const now = momentOf(clock);
    // Rests are timed on the monotonic clock: a wall clock stepped back or forward neither keeps an
    // address resting nor frees it early.
    const ops: LedgerOp[] = picture.state
      .expireRests(clock.monotonic())
      .map((a) => ({ op: 'unrest', address: formatIP({ family: range.family, value: a }) }));
    let address: bigint;
    if (requested !== undefined) {
      address = requested.value;
      const reservedBy =
        reserved === undefined || reserved.empty
          ? undefined
          : (value: bigint) => reserved.covering({ family: range.family, value });
      const verdict = picture.state.checkRequest(span, address, reservedBy);
      // Who holds it is read on the refusal only: the operator asked for this address by name.
      const holder = verdict.kind === 'occupied' ? await holderOf(store, pool, requested) : '';
      refuseUnlessAvailable(verdict, requested, range, holder);
    } else {
      const pick = picture.state.pick(span, blocked);
      if (pick.kind === 'exhausted') return { kind: 'full' };
      address = pick.address;
      ops.push({ op: 'cursor', address: formatIP({ family: range.family, value: address }) });
    }
    const allocation = recordOf(span, address, request, this.#o.node, now);
    ops.push({ op: 'allocate', allocation });
    const cooldownSeconds = request.cooldownSeconds ?? 0;
    const metadataOps = metadata.opsFor(span, cooldownSeconds, picture.cooldownSeconds);
    ops.push(...metadataOps);
    const result = await store.commit(pool, picture.revision, ops, guard, DURABLE_LATER);
    // The store's syncs resolve in order, each covering every commit before it: the latest stands for all.
    if (result.kind === 'committed' && result.durable !== undefined) this.#unsynced = result.durable;
    if (result.kind === 'conflict') {
      ledgers.forget(pool);
      return result.admissionLost === true ? { kind: 'conflict', admissionLost: true } : { kind: 'conflict' };
    }
    picture.revision = result.revision;
    picture.state.markAllocated(address);
    if (requested === undefined) picture.state.cursor = address;
    if (metadataOps.length > 0) {
      picture.cooldownSeconds = cooldownSeconds;
      metadata.written(span);
    }
    return { kind: 'done', assignment: { range, allocation, fresh: true } };
  }
}

/** ` (held by pod ns/name, container c eth0)`: who holds `address` in `pool`, or '' when unknown. */
async function holderOf(store: Store, pool: string, address: IPAddress): Promise<string> {
  const [held] = await store.list({ ledger: pool, address: formatIP(address) }).catch(() => []);
  if (held === undefined) return '';
  const pod = held.podName === undefined ? '' : `pod ${held.podNamespace ?? ''}/${held.podName}, `;
  return ` (held by ${pod}container ${held.containerID} ${held.ifname} of network ${held.network})`;
}

/** Throws the reason a requested address cannot be handed out; returns when it can. */
function refuseUnlessAvailable(verdict: RequestCheck, requested: IPAddress, range: RangeSpec, holder: string): void {
  switch (verdict.kind) {
    case 'free':
    case 'resting': // an explicit request overrides the cooldown: the operator asked for this address
      return;
    case 'occupied':
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `requested address ${formatIP(requested)} is already allocated in ${range.pool}${holder}`,
      );
    case 'outside':
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `requested address ${formatIP(requested)} is outside the allocatable span ` +
          `${formatIP({ family: range.family, value: range.first })}-${formatIP({
            family: range.family,
            value: range.last,
          })} ` +
          `of ${range.pool}`,
      );
    case 'excluded':
      if (range.gateway !== undefined && range.gateway.value === requested.value) {
        throw new WarrenError(
          'ADDRESS_UNAVAILABLE',
          `requested address ${formatIP(requested)} is the gateway of ${range.pool}; it is never handed to a container`,
        );
      }
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `requested address ${formatIP(requested)} is excluded from ${range.pool}`,
      );
    case 'reserved':
      // A refusal of what was asked for, not a passing condition: the operator holds it back.
      throw new WarrenError(
        'INVALID_CONFIG',
        `requested address ${formatIP(requested)} is reserved by ${ReservedAddresses.describe(verdict.reservation)}; ` +
          'it is never handed out while the reservation exists',
      );
    default: {
      const never: never = verdict;
      throw new Error(`unhandled verdict ${JSON.stringify(never)}`);
    }
  }
}
