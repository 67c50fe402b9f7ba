/**
 * A block handed over between nodes, on the two-tier store (tiered/store.ts; the allocator's side is
 * allocator/lending/handover.ts): a block whose owner holds no pod in it any more, and every address
 * in use in which is lent to one borrower, becomes the borrower's, its loans the borrower's own
 * allocations in it. Before, such a block was kept whole by its owner, its free addresses out of
 * use by either node (issue 36: stranded addresses of a tiny range).
 *
 * The writes, in order, each one a compare-and-swap (the claim's uid and version: ClusterTier.moveClaim;
 * the node's file at each ledger's revision: Store.commitAll):
 * 1. the owner O stops handing out in the block (TieredClaims.offering, in process), checks under
 *    the allocator's range lock that it holds nothing of its own there, and marks the claim
 *    `offeredTo` the borrower B (`offer`). From then on no node hands out in it: O's claims cache
 *    says it is offered, every other node reads it as O's;
 * 2. O flags B's grants of the block `offered` in B's request (the allocator's side);
 * 3. B moves the claim to itself, `takenFrom` O (`take`): B's claims cache holds it, but not to hand
 *    out from; no other node reads it as its own;
 * 4. B commits, in one local transaction, the block with its loans of it as its own allocations,
 *    each loan ledger left holding a mark (allocator/lending/handover.ts);
 * 5. B clears `takenFrom`: the block is B's like any other; then B drops the grants (the allocator's side);
 * 6. O, whose claim check finds its claim gone with B's standing there (or `takenFrom` O), lets go of
 *    its placeholders in the block, locally (`ClaimKeeper`, tiered/reclaim.ts: `handedOver`).
 * Crash points: before 1 completes, nothing changed (the in-process mark dies with O). After 1, O's
 * claim says offered, read again at start: O hands nothing out in it, and takes the offer back
 * (`retract`, a CAS: it fails once B took it) when B has not taken it in time. After 3, B's request
 * still carries the offered grants: B's lending round finds them and resumes at 4 (skipped when the
 * file already records the block as B's) and 5; the file check never records a `takenFrom` claim as
 * an empty block (tiered/file-check.ts), and give-back never sees it as B's (store.ts `ledgers`).
 * After 5, only the grants are left, dropped by B's next round. O's placeholders are never released
 * while its claim stands (the keeper acts only on a claim gone), so at no point is an address free
 * on one node while in use on another.
 *
 * Older nodes: an older borrower never reads the `offered` flag, so never takes a block; an older
 * node reads an offered claim as its owner's and a taken one as the borrower's (both true). The
 * offer needs the tier to keep `offeredTo` (the Kubernetes CRD of this version): a claim written back
 * without it is not an offer, and is taken back. On etcd an older node reads a claim key's value
 * by its `node` alone, as above.
 */
import { bookkeepingNetwork } from '../../ipam/bookkeeping.ts';
import type { BlockClaim, ClusterTier } from './cluster-tier.ts';
import type { TieredClaims } from './claims.ts';
import type { BlockHandover, TakeOutcome } from '../cluster.ts';
import type { LedgerOp, Store } from '../store.ts';

export interface HandoverParts {
  readonly local: Store;
  readonly tier: ClusterTier;
  readonly claims: TieredClaims;
  readonly node: string;
  /** Marks block `key` changed, for the publisher. */
  readonly mark: (key: string) => void;
}

export class TieredHandover implements BlockHandover {
  readonly #p: HandoverParts;

  constructor(parts: HandoverParts) {
    this.#p = parts;
  }

  async offer(key: string, to: string, stillFits: () => Promise<boolean>): Promise<BlockClaim | undefined> {
    const { tier, claims, node } = this.#p;
    if (tier.moveClaim === undefined || !(await claims.held(key))) return undefined;
    claims.offering(key, true);
    try {
      const current = await claims.current(key);
      if (current === undefined || current.offeredTo !== undefined || !(await stillFits())) return undefined;
      const offered = await tier.moveClaim(current, { node, offeredTo: to });
      if (offered === undefined) return undefined;
      if (offered.offeredTo !== to) {
        // A tier that does not keep the field (an older CRD): no offer; the claim as it was.
        const back = await tier.moveClaim(offered, { node });
        if (back !== undefined) claims.record(back);
        return undefined;
      }
      claims.record(offered);
      return offered;
    } finally {
      claims.offering(key, false);
    }
  }

  async retract(key: string): Promise<boolean> {
    const { tier, claims, node } = this.#p;
    const current = await claims.current(key);
    if (tier.moveClaim === undefined || current === undefined) return false;
    if (current.offeredTo === undefined) return true;
    const back = await tier.moveClaim(current, { node });
    if (back === undefined) return false;
    claims.record(back);
    return true;
  }

  offered(): BlockClaim[] {
    return this.#p.claims.all().filter((c) => c.offeredTo !== undefined);
  }

  async take(key: string, record: (claim: BlockClaim) => Promise<boolean>): Promise<TakeOutcome> {
    const { tier, claims, node, local } = this.#p;
    if (tier.moveClaim === undefined || local.commitAll === undefined) return 'not offered';
    let claim = await tier.claimOf(key);
    if (claim === undefined) return 'not offered';
    if (claim.node === node && claim.takenFrom === undefined) return 'taken';
    if (claim.offeredTo === node) {
      const taken = await tier.moveClaim(claim, { node, takenFrom: claim.node });
      if (taken === undefined) return 'conflict';
      claim = taken;
      claims.record(claim);
    }
    if (claim.node !== node || claim.takenFrom === undefined) return 'not offered';
    const read = await local.readLedger(key);
    if ((read.kind !== 'snapshot' || read.affinity !== node) && !(await record(claim))) return 'conflict';
    const settled = await tier.moveClaim(claim, { node });
    if (settled === undefined) return 'conflict';
    claims.record(settled);
    this.#p.mark(key);
    return 'taken';
  }
}

/**
 * The owner's side of step 6 (see the header): whether block `key`, whose claim this node lost to
 * `standing`, was handed over to that node — all this node holds in it are placeholders of addresses
 * lent to that node (allocator/lending/loans.ts) — and, if so, lets go of them and of the block here
 * (locally: the block is the other node's now, those addresses its own allocations there).
 */
export async function handedOver(local: Store, key: string, node: string, standing: BlockClaim): Promise<boolean> {
  if (standing.node === node) return false;
  const held = await local.list({ ledger: key });
  if (held.length === 0 || !held.every((a) => a.network === LENT && a.containerID === standing.node)) return false;
  const read = await local.readLedger(key);
  if (read.kind !== 'snapshot') return false;
  const ops: LedgerOp[] = held.map((a) => ({ op: 'release', address: a.address }));
  if (read.affinity !== undefined) ops.push({ op: 'unclaim' });
  return (await local.commit(key, read.revision, ops)).kind === 'committed';
}

const LENT = bookkeepingNetwork('lent');
