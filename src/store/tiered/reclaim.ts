/**
 * The node's side of "either side may forget" (docs/kubernetes-store.md, "A claim that vanishes"):
 * the node that holds addresses in a block is the authority on it. When the periodic check finds
 * this node's claim of a block gone from the cluster (an object deleted by hand, a claim key
 * deleted, the cluster's data restored from an older copy, this node forgotten while it was
 * paused), the keeper acts on it, run by run:
 * - a block in which this node's store holds addresses is claimed again under its own name (the
 *   tier's create-by-name: of this node and any other claimer, exactly one wins), so no other node
 *   takes it and hands its addresses out a second time; and published again (`republish`);
 * - a claim that stands for this node again (handed back by the node it was edited to name:
 *   tiered/stray-claims.ts) is held again, as it stands, and published again (`republish`);
 * - if another node's record stands there already, the block's whole range is halted on this node
 *   (TieredClaims.halted: ADD in it answers TRY_AGAIN naming why, and the store's ping fails so
 *   readiness and status say it): two nodes believe they hold one block, and only an operator can
 *   tell which addresses are in use. Each check reads the block again, and the halt ends when the
 *   other record is gone and this node holds the block again;
 * - a block in which this node holds no address is left to the cluster: its local affinity is
 *   removed, so the node neither allocates in it nor gives it back;
 * - a block handed over (tiered/handover.ts: another node's claim stands, and all this node holds in
 *   it are placeholders of addresses lent to that node) is let go of here, never claimed again;
 * - while the cluster cannot take the claim (away, or the tier refused it), the block stays out
 *   of use here and the next check tries again.
 * A claim naming this node that its file does not record claiming, in a block where it holds nothing,
 * is given back unused at the check that first sees it, unless this node is committing a claim of
 * that block now (tiered/stray-claims.ts: a restore of the cluster's data, an object edited by hand).
 * Each outcome is told to `notice` once per block and outcome. The keeper also applies the
 * claimer's guard (tiered/claim-guard.ts: `mayClaim`) and gives this node's claims back (`unclaim`).
 */
import { WarrenError, messageOf } from '../../core/errors.ts';
import { isBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import { isLoanKey } from '../../ipam/loan-key.ts';
import type { BlockClaim, ClusterTier, RangeRecord } from './cluster-tier.ts';
import type { CommitResult, LedgerOp, Revision, Store } from '../store.ts';
import { claimRefusal } from './claim-guard.ts';
import { handedOver } from './handover.ts';
import { giveBackUnrecorded, unrecordedIn } from './stray-claims.ts';
import type { TieredClaims } from './claims.ts';

export interface ClaimKeeperParts {
  readonly local: Store;
  readonly tier: ClusterTier;
  readonly claims: TieredClaims;
  readonly node: string;
  /** The range as pinned in the cluster (what a claim of its block needs). */
  readonly rangeOf: (key: string) => Promise<RangeRecord>;
  readonly notice: (message: string) => void;
  /**
   * Told block `key` was claimed again: its publication is written again at the next publication run
   * (tiered/publisher.ts `vanished`), since whatever removed the claim (the cluster's data gone back)
   * may have removed or aged its publication too, and nothing else would write it while the block is idle.
   */
  readonly republish?: ((key: string) => void) | undefined;
  /** Whether this node is committing a claim of block `key` now (recorded in its file once done). */
  readonly claiming?: ((key: string) => boolean) | undefined;
  /**
   * Whether the file check has compared the file with what this node published (tiered/file-check.ts):
   * until then a claim the file does not record may be one it is about to adopt from its publication.
   */
  readonly compared?: (() => boolean) | undefined;
}

type Outcome =
  | { readonly kind: 'held'; readonly claim: BlockClaim; readonly again: boolean }
  | { readonly kind: 'taken'; readonly by: string }
  | { readonly kind: 'empty' }
  | { readonly kind: 'handed'; readonly to: string }
  | { readonly kind: 'waiting'; readonly why: string };

export class ClaimKeeper {
  readonly #p: ClaimKeeperParts;
  /** Whether this process compared its file's blocks with the cluster's claims (`#compareFile`). */
  #fileCompared = false;
  /** Block key → the claim (uid and version) last judged a stray or not (`#strays`). */
  readonly #judged = new Map<string, string>();
  /** Block key → the outcome last told for it, so each is told once. */
  readonly #told = new Map<string, string>();

  constructor(parts: ClaimKeeperParts) {
    this.#p = parts;
  }

  /** Throws TRY_AGAIN naming why when range `rangePool` (any range, when none is named) is halted. */
  refuseHalted(rangePool?: string): void {
    const { claims } = this.#p;
    const halts = rangePool === undefined ? claims.halts() : [claims.halted(rangePool) ?? []].flat();
    if (halts.length > 0) throw new WarrenError('TRY_AGAIN', halts.join('; '));
  }

  /**
   * Why `node` may not claim block `key`, which nobody holds: its range halted (thrown), or the
   * block's publication says it may be in use (answered; the block is then left out of placement
   * until the next check).
   */
  async mayClaim(key: string, node: string): Promise<string | undefined> {
    this.refuseHalted(rangePoolOfKey(key));
    const refused = await claimRefusal(this.#p.tier, key, node);
    if (refused === undefined) return undefined;
    this.#p.claims.refuse(key, refused.owner);
    return refused.reason;
  }

  /**
   * Gives block `key` back (an `unclaim` commit at local revision `expected`): the claim is removed
   * only while it is still exactly this node's record, read again for its current version (ABA).
   */
  async unclaim(key: string, expected: Revision, ops: readonly LedgerOp[]): Promise<CommitResult> {
    const { local, claims, tier, node } = this.#p;
    const conflict = (reason: string): CommitResult => ({ kind: 'conflict', reason });
    if ((await local.readLedger(key)).revision !== expected) return conflict(`block ${key} changed`);
    const current = await claims.current(key);
    if (current === undefined) {
      claims.drop(key);
      return conflict(`block ${key} is no longer claimed by node ${node} in ${tier.description}`);
    }
    const outcome = await tier.unclaim(current);
    if (outcome !== 'released') return conflict(`the claim of block ${key} ${outcome} in ${tier.description}`);
    claims.drop(key);
    return local.commit(key, expected, ops);
  }

  /**
   * Once per process (found by the soak on etcd): the blocks its file holds as this node's, with
   * addresses, against its claims in the cluster, so a claim that vanished before this process
   * watched it is claimed again like one seen to vanish. Loans are no blocks of their own.
   */
  async #compareFile(): Promise<void> {
    if (this.#fileCompared) return;
    const { local, claims, node } = this.#p;
    const pools = await local.ledgers();
    const prefixes = new Map(pools.map((p) => [p.ledger, p.description?.blockPrefix]));
    for (const p of pools) {
      if (!isBlockKey(p.ledger) || p.affinity !== node || p.allocated === 0) continue;
      const blockPrefix = prefixes.get(rangePoolOfKey(p.ledger));
      if (blockPrefix !== undefined && isLoanKey(p.ledger, blockPrefix)) continue;
      await claims.load(rangePoolOfKey(p.ledger));
      claims.missing(p.ledger);
    }
    this.#fileCompared = true;
  }

  /** One check: this node's claims against the cluster's, and every lost claim acted on. */
  async check(): Promise<void> {
    await this.#compareFile();
    await this.#p.claims.check();
    for (const lost of this.#p.claims.lost()) {
      const outcome = await this.#keep(lost.claim).catch(
        (error: unknown): Outcome => ({ kind: 'waiting', why: messageOf(error) }),
      );
      this.#apply(lost.claim, outcome);
    }
    await this.#strays();
  }

  /**
   * This node's claims its file does not record claiming, each judged once (by uid and version), and
   * given back unused (stray-claims.ts); a claim this node is committing now is left to that commit.
   */
  async #strays(): Promise<void> {
    const { local, claims, tier, node } = this.#p;
    // Before the file check compared, the file may lack what it adopts from a publication (a file lost):
    // the file check gives back what it does not adopt (found by CI: a fresh file's own claim given back).
    if (this.#p.compared?.() === false) return;
    for (const claim of claims.checked()) {
      const seen = `${claim.uid} ${claim.version}`;
      if (claim.node !== node || claim.offeredTo !== undefined || claim.takenFrom !== undefined) continue;
      if (this.#judged.get(claim.key) === seen || this.#p.claiming?.(claim.key) === true) continue;
      this.#judged.set(claim.key, seen); // a claim edited since has another version: judged again
      const file = await unrecordedIn(local, claim.key, node, claim.uid);
      if (file === undefined) continue;
      const outcome = await giveBackUnrecorded(tier, local, claim, file, this.#p.notice).catch(() => undefined);
      if (outcome === undefined)
        this.#judged.delete(claim.key); // the cluster away: judged again next time
      else claims.drop(claim.key);
    }
  }

  async #keep(lost: BlockClaim): Promise<Outcome> {
    const { local, tier, node } = this.#p;
    const held = (await local.list({ ledger: lost.key })).length;
    const standing = await tier.claimOf(lost.key);
    if (standing?.node === node) return { kind: 'held', claim: standing, again: false };
    // Handed over (tiered/handover.ts): only placeholders of addresses lent to the node holding it now.
    if (standing !== undefined && held > 0 && (await handedOver(local, lost.key, node, standing)))
      return { kind: 'handed', to: standing.node };
    if (held === 0) {
      const read = await local.readLedger(lost.key);
      if (read.kind === 'snapshot' && read.affinity === node)
        await local.commit(lost.key, read.revision, [{ op: 'unclaim' }]);
      return { kind: 'empty' };
    }
    if (standing !== undefined) return { kind: 'taken', by: standing.node };
    const made = await tier.claim(await this.#p.rangeOf(lost.key), lost.key, node);
    if (made !== undefined) return { kind: 'held', claim: made, again: true };
    const now = await tier.claimOf(lost.key);
    if (now === undefined)
      return { kind: 'waiting', why: `${tier.description} refused it (is its range still admitted?)` };
    return now.node === node ? { kind: 'held', claim: now, again: false } : { kind: 'taken', by: now.node };
  }

  #apply(lost: BlockClaim, outcome: Outcome): void {
    const { claims, node, tier } = this.#p;
    const key = lost.key;
    const gone = `the claim of block ${key} by node ${node} vanished from ${tier.description}`;
    switch (outcome.kind) {
      case 'held':
        claims.record(outcome.claim);
        this.#told.delete(key);
        // Whatever took the claim away may have taken the publication too (deleted while the claim
        // was not held here, its vanishing was dropped): written again either way.
        this.#p.republish?.(key);
        if (!outcome.again) {
          this.#p.notice(
            `the claim of block ${key} stands for node ${node} again in ${tier.description}: in use again`,
          );
          return;
        }
        // The file's claim is this record now (stray-claims.ts tells the ones it did not make by it).
        this.#p.local.recordClaim?.(key, outcome.claim.uid);
        this.#p.notice(
          `${gone} (deleted by someone, or the cluster's data went back): it holds addresses here, ` +
            `so node ${node} claimed it again`,
        );
        return;
      case 'taken':
        claims.taken(key, outcome.by);
        this.#tell(key, 'taken', claims.halted(rangePoolOfKey(key)) ?? gone);
        return;
      case 'empty':
        claims.forget(key);
        this.#told.delete(key);
        this.#p.notice(`${gone}; it held no address here, so it is left to the cluster`);
        return;
      case 'handed':
        claims.forget(key);
        this.#told.delete(key);
        this.#p.notice(`block ${key} was handed over to node ${outcome.to}, which held its addresses in use`);
        return;
      case 'waiting':
        this.#tell(
          key,
          'waiting',
          `${gone}: no address is handed out in it until node ${node} claims it again ` +
            `(retried at each check): ${outcome.why}`,
        );
        return;
      default: {
        const never: never = outcome;
        throw new Error(`unhandled outcome ${JSON.stringify(never)}`);
      }
    }
  }

  #tell(key: string, kind: string, message: string): void {
    if (this.#told.get(key) === kind) return;
    this.#told.set(key, kind);
    this.#p.notice(message);
  }
}
