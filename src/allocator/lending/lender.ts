/**
 * The lending side, on a two-tier store (store/tiered/store.ts): a node that owns blocks of a range
 * answers the other nodes' open requests for addresses of it (store/tiered/cluster-tier.ts), and holds
 * every address it lends as a placeholder in its own block (loans.ts), so it never hands it out.
 * Run periodically (allocator.ts `lend`, from the agent's cluster upkeep).
 *
 * Guarantees:
 * - the placeholder is committed in this node's store before the grant is written: a grant in the
 *   cluster always has its placeholder, so an address is never both lent and handed out here;
 * - a grant write that lost (the request changed) or failed releases the placeholders at once
 *   (and the tidy-up below if that fails too); the request is answered again next round;
 * - a placeholder whose grant is in no request (given back by the borrower, or never written: a
 *   crash between placeholder and grant) is released once it has been missing for `graceMs` on the
 *   monotonic clock, so nothing stays lent for ever, and never sooner, so an answer under way (its
 *   placeholder committed, its grant not yet written) is not undone; one whose grant this process
 *   saw or wrote and that is gone since (a loan given back, an ask withdrawn) after
 *   GIVEN_BACK_GRACE_MS when that is shorter: three of the borrower's upkeep intervals, in which
 *   its loan check (loan-check.ts) writes back a grant someone else removed while the loan is in
 *   use, so the address is not stranded for the whole grace (issue 36); a placeholder is never
 *   released while its borrower publishes it in use;
 * - an address a migration recorded (grant lender `whereabouts`) in a block of this node is held as
 *   a placeholder like a loan of this node's: the node takes over as its lender; one granted to
 *   this node itself is left to adopting (migrated.ts), which records it as its pod's allocation;
 * - what is lent follows grant-policy.ts; local commits run under the range pool's lock, requests
 *   to the cluster outside it;
 * - before lending, an empty block no larger than what is still wanted is given back at once
 *   (give-back.ts `forRequest`): the asker claims it (block placement) rather than wait for the
 *   grace; it is what answers a range of one-address blocks, which lend nothing. The request's
 *   `wanted` drops by what was given back, which is what tells the asker to look again
 *   (borrower.ts); the block is unclaimed first, so a lender stopped between the two writes leaves
 *   a free block, never an address on two nodes.
 */
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import type { KeyedMutex } from '../../core/keyed-mutex.ts';
import { momentOf } from '../../core/moment.ts';
import { formatIP, parseIP } from '../../ipam/address.ts';
import { blockKeyPrefix, isBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { AddressRequest, ClusterRecords, Grant } from '../../store/cluster.ts';
import type { LedgerOp, Store } from '../../store/store.ts';
import type { RoomGiven } from '../give-back.ts';
import type { LedgerCache } from '../ledger-cache.ts';
import { type GrantChoice, type LendableBlock, chooseGrants } from './grant-policy.ts';
import { loanUser, userOf } from './loan-check.ts';
import { LENT_NETWORK, MIGRATION_LENDER, loanAddressOf, placeholderOf } from './loans.ts';
import { releasePlaceholders, takeBack } from './take-back.ts';
import { failpoint } from '../../core/failpoints.ts';

/** How long a placeholder whose grant was seen is kept once the grant is gone (see the header). */
export const GIVEN_BACK_GRACE_MS = 30_000;

export interface LenderOptions {
  readonly store: Store;
  readonly tier: ClusterRecords;
  readonly node: string;
  readonly clock: Clock;
  readonly ledgers: LedgerCache;
  /** The allocator's locks: local commits take the range pool's. */
  readonly locks: KeyedMutex;
  /** The range as this node's configs define it (its exclusions), when it has served it. */
  readonly rangeOf: (pool: string) => RangeSpec | undefined;
  /** Gives back at once this node's empty blocks of a range for a request (give-back.ts `forRequest`). */
  readonly giveBack?: ((pool: string, wanted: number) => Promise<RoomGiven>) | undefined;
}

export interface LendReport {
  /** Addresses granted this round, as `address → node`. */
  readonly lent: string[];
  /** Placeholders released because their grant was gone. */
  readonly released: string[];
  /** Placeholders kept past the grace, their grant gone but their loan in use (said once each). */
  readonly kept: string[];
  readonly errors: string[];
}

/** One of this node's blocks as lending reads it. */
type OwnBlock = LendableBlock & { readonly revision: number; readonly family: 4 | 6 };

export class Lender {
  readonly #o: LenderOptions;
  /** Placeholders seen without their grant, and since when (monotonic ms), by `pool address`. */
  readonly #missingSince = new Map<string, number>();
  /** Placeholders kept for a loan in use whose grant is gone, already said (`pool address`). */
  readonly #told = new Set<string>();
  /** Placeholders this process saw (or wrote) granted, `pool address`: their grant gone is a loan given back. */
  readonly #grantSeen = new Set<string>();

  constructor(options: LenderOptions) {
    this.#o = options;
  }

  /**
   * Releases orphaned placeholders and holds migrated addresses, then answers the open requests.
   * `migrated`: the requests holding grants of a migration (lender `whereabouts`), as just read.
   */
  async run(graceMs: number, migrated: readonly AddressRequest[]): Promise<LendReport> {
    const lent: string[] = [];
    const errors: string[] = [];
    // Placeholders whose grant is gone first: what they free is lent in this same round.
    const { released, kept } = await this.#tidy(graceMs, migrated, errors);
    // Only the ranges this node owns blocks of, one reading each (of a watch's copy, while one is
    // open: watched-requests.ts): what it reads grows with its blocks.
    for (const pool of await this.ownRanges()) {
      const answered = await this.answer(await this.#o.tier.openRequests(pool));
      lent.push(...answered.lent);
      errors.push(...answered.errors);
    }
    return { lent, released, kept, errors };
  }

  /** The ranges this node owns blocks of (local reads). */
  async ownRanges(): Promise<Set<string>> {
    return new Set(
      (await this.#o.store.ledgers())
        .filter((p) => p.affinity === this.#o.node && isBlockKey(p.ledger))
        .map((p) => rangePoolOfKey(p.ledger)),
    );
  }

  /**
   * Answers `requests` as they were told (a watch's hint, prompt-lending.ts) rather than listed:
   * each other node's open one, from this node's blocks of its range, guarded by the version told
   * (a request changed since is left, its placeholders released at once).
   */
  async answer(requests: readonly AddressRequest[]): Promise<{ lent: string[]; errors: string[] }> {
    const lent: string[] = [];
    const errors: string[] = [];
    for (const request of requests) {
      if (request.node === this.#o.node || request.wanted <= 0) continue;
      try {
        lent.push(...(await this.#answer(request)));
      } catch (error) {
        errors.push(`request of ${request.node} for ${request.pool}: ${messageOf(error)}`);
      }
    }
    return { lent, errors };
  }

  /** Grants what the policy allows from this node's blocks of the request's range. */
  async #answer(request: AddressRequest): Promise<string[]> {
    const room = (await this.#o.giveBack?.(request.pool, request.wanted)) ?? { returned: [], addresses: 0 };
    const given = room.returned.map((key) => `block ${key} given back for ${request.node}`);
    const blocks = request.wanted > room.addresses ? await this.#ownBlocks(request.pool) : [];
    const chosen = chooseGrants(blocks, request.wanted - room.addresses).map((c) => ({ ...c, borrower: request.node }));
    const held = await this.#hold(request.pool, blocks, chosen);
    if (held.length === 0 && room.addresses === 0) return [];
    const grants: Grant[] = held.map((g) => ({ address: g.text, lender: this.#o.node, block: g.block }));
    let written: AddressRequest | undefined;
    try {
      const wanted = Math.max(0, request.wanted - room.addresses - grants.length);
      if (held.length > 0) failpoint('loan-ungranted');
      written = await this.#o.tier.updateRequest(request, [...request.grants, ...grants], wanted);
      if (written !== undefined && held.length > 0) failpoint('loan-unnoted');
    } finally {
      // Lost or failed: the placeholders go now, not after the grace (the tidy-up is the fallback).
      if (written === undefined) await releasePlaceholders(this.#o, request.pool, held);
    }
    if (written === undefined && room.addresses > 0) await this.#tellRoom(request, room.addresses);
    // Written is seen: withdrawn before a tidy-up read it, its placeholder goes after GIVEN_BACK_GRACE_MS.
    if (written !== undefined) for (const g of held) this.#grantSeen.add(`${g.block} ${g.text}`);
    // A block given back stays given back (free to claim) whether or not the request said so.
    return written === undefined ? given : [...given, ...held.map((g) => `${g.text} → ${request.node}`)];
  }

  /** After a lost write, lowers the request's `wanted` by the room given back for it: the asker's wait ends on it. */
  async #tellRoom(request: AddressRequest, addresses: number): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = await this.#o.tier.requestOf(request.pool, request.node);
      if (now === undefined || now.wanted === 0) return;
      if ((await this.#o.tier.updateRequest(now, now.grants, Math.max(0, now.wanted - addresses))) !== undefined)
        return;
    }
  }

  /** This node's blocks of `pool`, read from its store now, with what the policy needs. */
  async #ownBlocks(pool: string): Promise<OwnBlock[]> {
    const { store, node, rangeOf } = this.#o;
    const key = parsePoolKey(pool);
    if (key === undefined) return [];
    const excluded = rangeOf(pool)?.excluded ?? [];
    const out: OwnBlock[] = [];
    for (const summary of await store.ledgers(blockKeyPrefix(pool))) {
      const first = parseIP(summary.description?.first ?? '');
      const last = parseIP(summary.description?.last ?? '');
      if (summary.affinity !== node || first === undefined || last === undefined) continue;
      // A block of one address is not lent: the loan's key would be the block's (loans.ts).
      if (loanAddressOf({ pool, family: key.family }, summary.ledger) !== undefined) continue;
      const read = await store.readLedger(summary.ledger);
      if (read.kind !== 'snapshot') continue;
      const taken = [...read.allocations, ...read.resting.map((r) => r.address)]
        .map((t) => parseIP(t)?.value)
        .filter((v): v is bigint => v !== undefined);
      const cursor = read.cursor === undefined ? undefined : parseIP(read.cursor)?.value;
      out.push({
        key: summary.ledger,
        span: { first: first.value, last: last.value, excluded },
        taken,
        cursor,
        revision: read.revision,
        family: key.family,
      });
    }
    return out;
  }

  /** Commits placeholders for `chosen`, block by block; what was committed. */
  async #hold(
    pool: string,
    blocks: readonly OwnBlock[],
    chosen: ReadonlyArray<GrantChoice & { readonly borrower: string }>,
  ): Promise<Array<{ block: string; text: string }>> {
    const { store, ledgers, locks, clock } = this.#o;
    const held: Array<{ block: string; text: string }> = [];
    await locks.run(pool, async () => {
      for (const block of blocks) {
        const mine = chosen.filter((c) => c.block === block.key);
        if (mine.length === 0) continue;
        const now = momentOf(clock);
        const ops: LedgerOp[] = mine.map((c) => ({
          op: 'allocate',
          allocation: placeholderOf(block.key, block.family, c.address, c.borrower, now),
        }));
        const result = await store.commit(block.key, block.revision, ops);
        ledgers.forget(block.key);
        if (result.kind === 'committed')
          for (const c of mine)
            held.push({ block: block.key, text: formatIP({ family: block.family, value: c.address }) });
      }
    });
    return held;
  }

  /** Takes back the grants their borrowers flagged given back, placeholders released at once (take-back.ts). */
  takeBack(requests: readonly AddressRequest[]): Promise<string[]> {
    return takeBack(this.#o, requests);
  }

  /**
   * Holds migrated addresses that lie in this node's blocks, and releases placeholders whose grant
   * has been gone for the grace. What it released.
   */
  async #tidy(
    graceMs: number,
    requests: readonly AddressRequest[],
    errors: string[],
  ): Promise<{ released: string[]; kept: string[] }> {
    const { store, tier, node, clock } = this.#o;
    const granted = new Set<string>();
    const migrated: Array<{ request: AddressRequest; grant: Grant }> = [];
    // Grants of this node are read only while it holds placeholders (a lender's own records say so).
    const placeholders = await store.list({ network: LENT_NETWORK });
    const lentBy: Array<[string, readonly AddressRequest[]]> = [[MIGRATION_LENDER, requests]];
    const released: string[] = [];
    if (placeholders.length > 0) {
      const mine = await tier.requestsLentBy(node);
      released.push(...(await this.takeBack(mine)));
      lentBy.push([node, mine]);
    }
    for (const [lender, lent] of lentBy)
      for (const request of lent)
        for (const grant of request.grants) {
          if (grant.lender !== lender) continue;
          granted.add(grantKey(request.pool, request.node, grant.address));
          if (lender === MIGRATION_LENDER) migrated.push({ request, grant });
        }
    await this.#holdMigrated(migrated, errors);
    const now = clock.monotonic();
    const kept: string[] = [];
    const seen = new Set<string>();
    for (const placeholder of placeholders) {
      const id = `${placeholder.pool} ${placeholder.address}`;
      seen.add(id);
      if (granted.has(grantKey(rangePoolOfKey(placeholder.pool), placeholder.containerID, placeholder.address))) {
        this.#missingSince.delete(id);
        this.#grantSeen.add(id);
        continue;
      }
      const since = this.#missingSince.get(id);
      if (since === undefined) this.#missingSince.set(id, now);
      const grace = this.#grantSeen.has(id) ? Math.min(graceMs, GIVEN_BACK_GRACE_MS) : graceMs;
      if ((since ?? now) + grace > now) continue;
      try {
        // The borrower still publishes a container using it: kept, never handed out twice (loan-check.ts).
        const user = await loanUser(
          tier,
          rangePoolOfKey(placeholder.pool),
          placeholder.containerID,
          placeholder.address,
        );
        if (user !== undefined) {
          if (!this.#told.has(id))
            kept.push(
              `placeholder of ${placeholder.address} lent to node ${placeholder.containerID} kept: ` +
                `its grant is gone, but that node publishes ${userOf(user)} using it`,
            );
          this.#told.add(id);
          continue;
        }
        await releasePlaceholders(this.#o, rangePoolOfKey(placeholder.pool), [
          { block: placeholder.pool, text: placeholder.address },
        ]);
        released.push(`${placeholder.address} (lent to ${placeholder.containerID})`);
        this.#grantSeen.delete(id);
        this.#missingSince.delete(id);
        this.#told.delete(id);
      } catch (error) {
        errors.push(`releasing the placeholder of ${placeholder.address}: ${messageOf(error)}`);
      }
    }
    for (const id of this.#missingSince.keys()) if (!seen.has(id)) this.#missingSince.delete(id);
    for (const id of this.#told) if (!this.#missingSince.has(id)) this.#told.delete(id);
    for (const id of this.#grantSeen) if (!seen.has(id)) this.#grantSeen.delete(id);
    return { released, kept };
  }

  /** Placeholders for migrated addresses in this node's blocks that have none yet. */
  async #holdMigrated(migrated: ReadonlyArray<{ request: AddressRequest; grant: Grant }>, errors: string[]) {
    const byPool = new Map<string, Array<{ request: AddressRequest; grant: Grant }>>();
    for (const m of migrated) byPool.set(m.request.pool, [...(byPool.get(m.request.pool) ?? []), m]);
    for (const [pool, grants] of byPool) {
      try {
        for (const block of await this.#ownBlocks(pool)) {
          const taken = new Set(block.taken);
          const chosen = grants.flatMap(({ request, grant }) => {
            // Granted to this node: its pod's allocation, which adopting records (migrated.ts), never
            // a placeholder lent to itself.
            if (request.node === this.#o.node) return [];
            const ip = parseIP(grant.address);
            // Held already (or, if by a pod, a conflict the migration reported and left to the operator).
            if (ip === undefined || ip.value < block.span.first || ip.value > block.span.last || taken.has(ip.value))
              return [];
            return [{ block: block.key, address: ip.value, borrower: request.node }];
          });
          if (chosen.length > 0) await this.#hold(pool, [block], chosen);
        }
      } catch (error) {
        errors.push(`holding migrated addresses of ${pool}: ${messageOf(error)}`);
      }
    }
  }
}

function grantKey(pool: string, node: string, address: string): string {
  return `${pool}\0${node}\0${address}`;
}
