/**
 * This node's block claims as the two-tier store (tiered/store.ts) last saw them in the cluster:
 * the cache that lets an ADD in an own block commit with no request to the cluster.
 *
 * Guarantees:
 * - a range's claims are read from the cluster once (`claimsOf(node, range)`), when the range is
 *   first touched (or all at once by `loadAll`); after that `check` compares them with what the
 *   watch of this node's claims shows (`watch`: ClusterTier.watchClaims), with no request, and
 *   lists them only while no watch is open and synced (the cluster away, a tier with none);
 *   what is read grows with this node's blocks, never with the range;
 * - a claim is judged gone only on evidence newer than the claim: a listing that started after this
 *   process recorded it, or a watch whose version reached the claim's. A claim recorded while a
 *   listing is in flight (an ADD claiming a block as the check lists), or before the watch showed
 *   it, is left for the next check: every change to the cache is stamped from one counter, and a
 *   listing remembers the stamp it started at;
 * - a claim found gone (or replaced by another record) is dropped and remembered as lost, with the
 *   record it had: `holds` answers false for it, so no address is handed out in it until this node
 *   holds the block again (tiered/reclaim.ts re-creates it); one that another node's record took is
 *   `taken`, which halts its whole range (`halted`), since two nodes then believe they hold it;
 * - a listing of the range that shows this node's record of a block judged lost (placement's
 *   `rangeBlocks`, started after the judgment) restores it: one wrong judgment never keeps a block
 *   out of use, so it never wedges a range;
 * - a block in a handover (tiered/handover.ts: offered by this node, or taken by it and not yet
 *   recorded in its file) is held but not `holds`: nothing is handed out in it here;
 * - after the cluster's data went back under this process (`rebase`, at the operator's accept) no
 *   claim cached before `holds` until a listing started since has judged it: their versions are of
 *   a history the cluster no longer has, which a watch's version may never pass again;
 * - a claim's version is refreshed at each check (publishing moves it), and `current` reads the
 *   record again before a give-back, so an unclaim never acts on a stale version of its own claim
 *   and never on another node's record (the uid must match).
 */
import type { BlockClaim, ClaimsSeen, ClusterTier, ClusterWatch } from './cluster-tier.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';

/** A claim of this node that left the cluster's listing, and what stands in its place. */
export interface LostClaim {
  /** The record this node held. */
  readonly claim: BlockClaim;
  /** The node whose record stands there now; undefined while none does (or it was not read yet). */
  readonly takenBy?: string;
}

export class TieredClaims {
  readonly #tier: ClusterTier;
  readonly #node: string;
  readonly node: string;
  /** Block key → this node's claim of it. */
  readonly #claims = new Map<string, BlockClaim>();
  /** Block key → the stamp at which its cache entry (held or lost) last changed. */
  readonly #stamps = new Map<string, number>();
  /** The last stamp given: one counter orders cache changes and the start of listings. */
  #stamp = 0;
  /** Range pools whose claims were read from the cluster. */
  readonly #loaded = new Set<string>();
  /** Blocks whose claim vanished from the cluster while this node held it. */
  readonly #lost = new Map<string, LostClaim>();
  /** Blocks nobody holds this node may not claim (tiered/claim-guard.ts) → their publisher, till the next check. */
  readonly #refused = new Map<string, string>();
  /** Blocks this node is about to offer to another (tiered/handover.ts): held, but not to hand out from. */
  readonly #offering = new Set<string>();
  /** Reads of one range in flight, so concurrent first touches read once. */
  readonly #loading = new Map<string, Promise<void>>();
  /** This node's claims as the last check saw them (`checked`). */
  #checked: readonly BlockClaim[] = [];
  /** The watch of this node's claims, from `watch` (the store's start) on. */
  #watch: ClusterWatch<ClaimsSeen> | undefined;
  /** The stamp of the last `rebase`, until a listing started after it has judged the claims. */
  #rebased: number | undefined;

  constructor(tier: ClusterTier, node: string) {
    this.#tier = tier;
    this.#node = node;
    this.node = node;
  }

  /** Judges this node's claims by what `watch` shows, while it is open and synced, instead of listing them. */
  watch(watch: ClusterWatch<ClaimsSeen> | undefined): void {
    this.#watch = watch;
  }

  /** A stamp for a listing about to start: entries changed after it are newer than what it reads. */
  listingStarts(): number {
    this.#stamp += 1;
    return this.#stamp;
  }

  /** Whether the entry of `key` changed after a listing started at `stamp` (which then says nothing of it). */
  #newerThan(key: string, stamp: number): boolean {
    return (this.#stamps.get(key) ?? 0) > stamp;
  }

  #touch(key: string): void {
    this.#stamp += 1;
    this.#stamps.set(key, this.#stamp);
  }

  /** Reads the range's claims of this node from the cluster, once. */
  async load(rangePool: string): Promise<void> {
    if (this.#loaded.has(rangePool)) return;
    let loading = this.#loading.get(rangePool);
    if (loading === undefined) {
      loading = (async () => {
        const started = this.listingStarts();
        for (const claim of await this.#tier.claimsOf(this.#node, rangePool)) this.#saw(claim, started);
        this.#loaded.add(rangePool);
      })().finally(() => this.#loading.delete(rangePool));
      this.#loading.set(rangePool, loading);
    }
    await loading;
  }

  /** Reads every claim of this node, of every range (marking those ranges read): what it holds. */
  async loadAll(): Promise<BlockClaim[]> {
    const started = this.listingStarts();
    const all = await this.#tier.claimsOf(this.#node);
    for (const claim of all) {
      const range = rangePoolOfKey(claim.key);
      // Given back (or judged lost) since the listing started: the listing is older than that.
      if (this.#loaded.has(range) && !this.#claims.has(claim.key) && this.#newerThan(claim.key, started)) continue;
      this.#saw(claim, started);
    }
    for (const claim of all) this.#loaded.add(rangePoolOfKey(claim.key));
    return all.filter((c) => this.#claims.has(c.key));
  }

  /** A claim of this node a listing started at `stamp` showed: cached unless the cache is newer. */
  #saw(claim: BlockClaim, stamp: number): void {
    if (this.#newerThan(claim.key, stamp)) return;
    const lost = this.#lost.get(claim.key);
    // A lost claim comes back only as another record (re-created), or as the same one when a listing
    // newer than the judgment shows it: then the judgment was wrong.
    if (lost !== undefined) this.#lost.delete(claim.key);
    this.#claims.set(claim.key, claim);
    this.#touch(claim.key);
  }

  /**
   * A listing of a range started at `stamp` (`listingStarts`) showed `claim`: this node's record of
   * a block it does not hold in the cache (a judgment of lost that was wrong, or another process of
   * this node's claim) is taken in.
   */
  sawInRange(claim: BlockClaim, stamp: number): void {
    if (claim.node !== this.#node || this.#claims.has(claim.key)) return;
    this.#saw(claim, stamp);
  }

  /**
   * Whether this node holds block `key` (its range loaded first) and may hand out addresses in it:
   * not while it is being handed over (offered by this node, or taken by it and not yet recorded in
   * its file: tiered/handover.ts).
   */
  holds(key: string): boolean {
    return this.#claims.has(key) && !this.handingOver(key) && !this.#unjudged(key);
  }

  /**
   * The cluster's data went back (restored from an older copy, or lost) while this process cached
   * its claims, and the operator accepts it as it is: the versions cached are of the history
   * before, so a watch's version says nothing of them (one restored below them may not pass them
   * for long: found by the soak, kubernetes seed 3839 step 5695, where a node handed out an address
   * in a block whose claim the restore took and another node then claimed). Until the next check
   * lists, no claim cached before now `holds`; one recorded from now on (claimed again) does.
   */
  rebase(): void {
    this.#rebased = this.listingStarts();
  }

  /** Cached before the last `rebase`, and not judged by a listing since. */
  #unjudged(key: string): boolean {
    return this.#rebased !== undefined && !this.#newerThan(key, this.#rebased);
  }

  /** Whether block `key` is in a handover: offered (or about to be) by this node, or taken and not yet recorded. */
  handingOver(key: string): boolean {
    const claim = this.#claims.get(key);
    return this.#offering.has(key) || claim?.offeredTo !== undefined || claim?.takenFrom !== undefined;
  }

  /** Marks block `key` as about to be offered (`on`), before its claim says so: nothing is handed out in it. */
  offering(key: string, on: boolean): void {
    if (on) this.#offering.add(key);
    else this.#offering.delete(key);
  }

  /** Whether this node holds block `key`, its range's claims loaded first (may ask the cluster). */
  async held(key: string): Promise<boolean> {
    await this.load(rangePoolOfKey(key));
    return this.holds(key);
  }

  /**
   * Whether the claim of `key` vanished (or was taken) while this node held it, and is not held
   * again; or may have: cached before a `rebase` and not judged since (nothing is handed out in it,
   * nor is the block placed, and the file keeps it as its own).
   */
  vanished(key: string): boolean {
    return this.#lost.has(key) || (this.#claims.has(key) && this.#unjudged(key));
  }

  /** The claims lost and not held again: what the check tries to re-create. */
  lost(): LostClaim[] {
    return [...this.#lost.values()];
  }

  /**
   * A block this node's file holds as its own, with addresses, that the cluster's claims of this
   * node do not show once its range is read (the claim vanished while no process of this node
   * watched it, e.g. deleted just before a restart): judged lost like a claim seen to vanish.
   */
  missing(key: string): void {
    if (this.#claims.has(key) || this.#lost.has(key) || !this.#loaded.has(rangePoolOfKey(key))) return;
    this.#lost.set(key, { claim: { key, node: this.#node, uid: '', version: '' } });
    this.#touch(key);
  }

  /** Records that another node's record stands where this node's claim of `key` was. */
  taken(key: string, by: string): void {
    const lost = this.#lost.get(key);
    if (lost !== undefined) this.#lost.set(key, { ...lost, takenBy: by });
  }

  /** Why range `rangePool` may not allocate: a block of it this node held is another node's now. */
  halted(rangePool: string): string | undefined {
    for (const { claim, takenBy } of this.#lost.values())
      if (takenBy !== undefined && rangePoolOfKey(claim.key) === rangePool)
        return (
          `allocation in range ${rangePool} is halted: the claim of block ${claim.key} by node ${this.#node} ` +
          `vanished and node ${takenBy} holds the block now, while this node may still hold addresses in it`
        );
    return undefined;
  }

  /** The reasons of every halted range. */
  halts(): string[] {
    const taken = [...this.#lost.values()].filter((l) => l.takenBy !== undefined);
    return [...new Set(taken.map((l) => rangePoolOfKey(l.claim.key)))].flatMap((r) => this.halted(r) ?? []);
  }

  /** Forgets a lost claim this node does not mean to hold again (it held nothing in the block). */
  forget(key: string): void {
    this.#lost.delete(key);
    this.#touch(key);
  }

  /** Leaves block `key` out of placement until the next check: `owner`'s publication says it may be in use. */
  refuse(key: string, owner: string): void {
    this.#refused.set(key, owner);
  }

  /** Blocks this node may not claim until the next check, with the node whose publication keeps each. */
  refusals(): [string, string][] {
    return [...this.#refused];
  }

  /** This node's claims of range `rangePool` (loaded). */
  of(rangePool: string): BlockClaim[] {
    return [...this.#claims.values()].filter((c) => rangePoolOfKey(c.key) === rangePool);
  }

  /** Every claim held, of every range. */
  all(): BlockClaim[] {
    return [...this.#claims.values()];
  }

  record(claim: BlockClaim): void {
    this.#claims.set(claim.key, claim);
    this.#lost.delete(claim.key);
    this.#touch(claim.key);
  }

  drop(key: string): void {
    this.#claims.delete(key);
    this.#touch(key);
  }

  /** The cluster's record of this node's claim of `key`: undefined when it is gone or not ours any more. */
  async current(key: string): Promise<BlockClaim | undefined> {
    const held = this.#claims.get(key);
    const now = await this.#tier.claimOf(key);
    if (now === undefined || now.node !== this.#node || (held !== undefined && now.uid !== held.uid)) return undefined;
    return now;
  }

  /** This node's claims as the last check saw them in the cluster (the watch, or its listing). */
  checked(): readonly BlockClaim[] {
    return this.#checked;
  }

  /**
   * Compares the cached claims with the cluster's (what the watch shows, or one listing of this
   * node's claims while no watch is open and synced): answers the claims that vanished since the
   * last check, judged only on evidence newer than each, and refreshes the versions of the others.
   */
  async check(): Promise<BlockClaim[]> {
    this.#refused.clear(); // looked at again by the next claim of each
    const seen = this.#rebased === undefined ? this.#watch?.seen() : undefined; // after a rebase: a listing
    if (seen !== undefined) {
      // The watch has every change up to its version: a claim at a later version it may not show yet.
      const shows = (claim: BlockClaim) => Number(claim.version) <= seen.version;
      this.#checked = seen.claims;
      return this.#judge(new Map(seen.claims.map((c) => [c.key, c])), (_key, claim) => shows(claim));
    }
    const started = this.listingStarts();
    const listed = await this.#tier.claimsOf(this.#node);
    this.#checked = listed;
    const now = new Map(listed.map((c) => [c.key, c]));
    // Recorded after the listing started: the listing cannot show it, and says nothing of it.
    const gone = this.#judge(now, (key) => !this.#newerThan(key, started));
    if (this.#rebased !== undefined && this.#rebased < started) this.#rebased = undefined;
    return gone;
  }

  /** The cached claims against `now`, each judged only where `tells` says `now` can show it. */
  #judge(now: Map<string, BlockClaim>, tells: (key: string, claim: BlockClaim) => boolean): BlockClaim[] {
    const gone: BlockClaim[] = [];
    for (const [key, claim] of this.#claims) {
      if (!tells(key, claim)) continue;
      const seen = now.get(key);
      if (seen !== undefined && seen.uid === claim.uid) {
        this.#claims.set(key, seen);
        continue;
      }
      // Only ranges this store has read: a claim of another range is not this process's to judge.
      if (!this.#loaded.has(rangePoolOfKey(key))) continue;
      this.#claims.delete(key);
      this.#lost.set(key, { claim });
      this.#touch(key);
      gone.push(claim);
    }
    return gone;
  }
}
