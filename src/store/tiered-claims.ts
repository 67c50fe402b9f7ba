/**
 * This node's block claims as the two-tier store (tiered-store.ts) last saw them in the cluster:
 * the cache that lets an ADD in an own block commit with no request to the cluster.
 *
 * Guarantees:
 * - a range's claims are read from the cluster once (`claimsOf(node, range)`), when the range is
 *   first touched, and after that only by the periodic `check`; what is read grows with this node's
 *   blocks, never with the range;
 * - a claim found gone (or replaced by another record) at a check is dropped and remembered as
 *   vanished: `holds` answers false for it, so no address is handed out in it again until this node
 *   claims the block anew; the vanishing is told once, by name;
 * - a claim's version is refreshed at each check (publishing moves it), and `current` reads the
 *   record again before a give-back, so an unclaim never acts on a stale version of its own claim
 *   and never on another node's record (the uid must match).
 */
import type { BlockClaim, ClusterTier } from './cluster-tier.ts';
import { rangePoolOfKey } from '../ipam/blocks.ts';

export class TieredClaims {
  readonly #tier: ClusterTier;
  readonly #node: string;
  readonly node: string;
  /** Block key → this node's claim of it. */
  readonly #claims = new Map<string, BlockClaim>();
  /** Range pools whose claims were read from the cluster. */
  readonly #loaded = new Set<string>();
  /** Blocks whose claim vanished from the cluster while this node held it. */
  readonly #vanished = new Set<string>();
  /** Reads of one range in flight, so concurrent first touches read once. */
  readonly #loading = new Map<string, Promise<void>>();

  constructor(tier: ClusterTier, node: string) {
    this.#tier = tier;
    this.#node = node;
    this.node = node;
  }

  /** Reads the range's claims of this node from the cluster, once. */
  async load(rangePool: string): Promise<void> {
    if (this.#loaded.has(rangePool)) return;
    let loading = this.#loading.get(rangePool);
    if (loading === undefined) {
      loading = (async () => {
        for (const claim of await this.#tier.claimsOf(this.#node, rangePool)) this.#claims.set(claim.key, claim);
        this.#loaded.add(rangePool);
      })().finally(() => this.#loading.delete(rangePool));
      this.#loading.set(rangePool, loading);
    }
    await loading;
  }

  /** Reads every claim of this node, of every range (marking those ranges read): what it holds. */
  async loadAll(): Promise<BlockClaim[]> {
    const all = await this.#tier.claimsOf(this.#node);
    for (const claim of all) {
      if (this.#loaded.has(rangePoolOfKey(claim.key)) && !this.#claims.has(claim.key)) continue; // given back since
      this.#claims.set(claim.key, claim);
    }
    for (const claim of all) this.#loaded.add(rangePoolOfKey(claim.key));
    return all.filter((c) => this.#claims.has(c.key));
  }

  /** Whether this node holds block `key` (its range loaded first). */
  holds(key: string): boolean {
    return this.#claims.has(key);
  }

  /** Whether this node holds block `key`, its range's claims loaded first (may ask the cluster). */
  async held(key: string): Promise<boolean> {
    await this.load(rangePoolOfKey(key));
    return this.holds(key);
  }

  vanished(key: string): boolean {
    return this.#vanished.has(key);
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
    this.#vanished.delete(claim.key);
  }

  drop(key: string): void {
    this.#claims.delete(key);
  }

  /** The cluster's record of this node's claim of `key`: undefined when it is gone or not ours any more. */
  async current(key: string): Promise<BlockClaim | undefined> {
    const held = this.#claims.get(key);
    const now = await this.#tier.claimOf(key);
    if (now === undefined || now.node !== this.#node || (held !== undefined && now.uid !== held.uid)) return undefined;
    return now;
  }

  /**
   * Compares the cached claims with the cluster's (one listing of this node's claims): answers the
   * keys that vanished since the last check, and refreshes the versions of the others.
   */
  async check(): Promise<string[]> {
    const now = new Map((await this.#tier.claimsOf(this.#node)).map((c) => [c.key, c]));
    const gone: string[] = [];
    for (const [key, claim] of this.#claims) {
      const seen = now.get(key);
      if (seen !== undefined && seen.uid === claim.uid) {
        this.#claims.set(key, seen);
        continue;
      }
      // Only ranges this store has read: a claim of another range is not this process's to judge.
      if (!this.#loaded.has(rangePoolOfKey(key))) continue;
      this.#claims.delete(key);
      this.#vanished.add(key);
      gone.push(key);
    }
    return gone;
  }
}
