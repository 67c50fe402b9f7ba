/**
 * The cluster tier of the two-tier store on etcd v3 (`EtcdTier implements ClusterTier`,
 * src/store/tiered/cluster-tier.ts), wired from its parts: block claims and range records
 * (etcd-tier/claims.ts), publications (etcd-tier/publications.ts), address requests
 * (etcd-tier/requests.ts) and address spaces (etcd-tier/spaces.ts) as keys under the tier's own prefix
 * (the layout is in etcd-tier/kv.ts), membership and chores on etcd leases (etcd-tier/membership.ts).
 * What `--store etcd` runs beside the node's SQLite file (tiered.ts); it passes the same contract as
 * the Kubernetes one (test/store/tiered/tier-conformance.ts). Each part's header says how it keeps
 * the contract's guarantees.
 *
 * What it must know between its own calls it learns from etcd watches (tier-watches.ts: its node's
 * claims, the address spaces, the requests, its identity, announcement and recovery marker), so an
 * idle agent reads and writes nothing; `ping` answers from them while they are live.
 *
 * A store that lost its data (etcd-tier/continuity.ts: revision backwards, another cluster, the identity
 * record gone or replaced, this node's name taken) halts the tier: every write (claims, give-backs,
 * publications, requests, admissions) is refused with TRY_AGAIN naming why (etcd-tier/kv.ts `write`),
 * `ping` throws the same, and membership says it (`halted`), until an operator accepts the store.
 */
import type { KVClient, Namespace } from 'etcd3';
import type { Etcd3 } from 'etcd3';
import { type Clock, systemClock } from '../../core/clock.ts';
import type {
  AddressRequest,
  BlockClaim,
  ClaimsSeen,
  ClusterTier,
  ClusterWatch,
  PublicationsWatch,
  Grant,
  Page,
  PublishedBlock,
  RangeRecord,
  SpacesSeen,
  UnclaimResult,
  ClaimState,
} from '../tiered/cluster-tier.ts';
import { EtcdTierClaims } from './claims.ts';
import { type EtcdClientOptions, openEtcdClient } from './client.ts';
import { EtcdContinuity } from './continuity.ts';
import { IDENTITY_KEY, verifyIdentity } from './identity.ts';
import { EtcdHistory } from './history.ts';
import { EtcdMembership } from './membership.ts';
import { EtcdRecovery } from './recovery.ts';
import type { AcceptReport, Store } from '../store.ts';
import { type LegacyReport, forgetLegacyNode, importLegacy, legacyLeft } from './legacy-import.ts';
import { EtcdTierPublications } from './publications.ts';
import { EtcdTierRequests } from './requests.ts';
import type { RecordView, RequestChange, RequestScope } from '../cluster.ts';
import { EtcdTierSpaces } from './spaces.ts';
import { TierKv } from './kv.ts';
import { EtcdTierWatches } from './tier-watches.ts';

export interface EtcdTierOptions extends EtcdClientOptions {
  /**
   * The tier's key prefix: --etcd-prefix, the one the old one-tier store used, so its identity,
   * announcements, chores and admissions carry over and its old documents are found to be moved.
   */
  readonly prefix: string;
  /** Lifetime of an announcement not renewed, seconds. */
  readonly leaseSeconds: number;
  readonly notice?: (message: string) => void;
  /** Told what the agent logs at debug: an outcome a store check begun before an accept dropped. */
  readonly debug?: (message: string) => void;
  /**
   * The store's identity this agent recorded when it last ran (its state directory): a store found
   * without it, or with another, lost its data while the agent was away, and is not written.
   */
  readonly identity?: string | undefined;
  /** Least time between two readings of etcd's history and room (etcd-history.ts), ms. Default 60000. */
  readonly historyIntervalMs?: number;
  /** What the watches back off on (tier-watches.ts). Default the system clock. */
  readonly clock?: Clock;
}

export async function openEtcdTier(o: EtcdTierOptions): Promise<EtcdTier> {
  const { client, timeout } = await openEtcdClient(o);
  return new EtcdTier(client, o, timeout);
}

export class EtcdTier implements ClusterTier {
  readonly description: string;
  readonly membership: EtcdMembership;
  readonly spaces: EtcdTierSpaces;
  /** etcd's history and room, for `warren doctor` (Store.cluster.history of the store on this tier). */
  readonly history: EtcdHistory;
  // No `holdings` (nor `publishLoan`): etcd keeps none yet; StatefulSet ordinals and IPAMClaims need Kubernetes.
  readonly #client: Etcd3;
  readonly #kv: TierKv;
  readonly #ns: Namespace;
  readonly #claims: EtcdTierClaims;
  readonly #requests: EtcdTierRequests;
  readonly #publications: EtcdTierPublications;
  /** The watches this tier keeps instead of reading again (tier-watches.ts). */
  readonly #watches: EtcdTierWatches;
  /** The identity recorded at the agent's last run; compared at the first verification only. */
  #expectedIdentity: string | undefined;
  readonly #verifyIdentity: () => Promise<void>;
  /** What the operator's accept writes back (onAccept); nothing until the store on this tier says. */
  #republish: (node: string) => Promise<AcceptReport> = async () => ({ addresses: 0, blocks: 0, conflicts: [] });

  constructor(client: Etcd3, o: EtcdTierOptions, timeout = 2000) {
    this.description = `etcd tier ${o.endpoints.join(',')} prefix ${o.prefix}`;
    this.#client = client;
    const continuity = new EtcdContinuity(Date.now, o.debug);
    this.#expectedIdentity = o.identity;
    const kvClient: KVClient = client.kv;
    this.#kv = new TierKv(kvClient, o.prefix, continuity);
    this.#verifyIdentity = async () => {
      const expected = this.#expectedIdentity;
      const key = `${o.prefix}${IDENTITY_KEY}`;
      await verifyIdentity({ ns: this.#ns, call, continuity, where: this.description, key, expected });
      // Compared once: from now on what this process verified counts, or the operator's accept.
      this.#expectedIdentity = undefined;
    };
    this.#ns = client.namespace(o.prefix);
    const call = <T>(what: string, body: () => Promise<T>) => this.#kv.call(what, body);
    this.#watches = new EtcdTierWatches({
      ns: this.#ns,
      kv: this.#kv,
      clock: o.clock ?? systemClock,
      observe: (revision) => continuity.saw(revision),
      // A halted tier writes nothing whatever its watches show: the check is what halts it.
      verify: () =>
        this.#kv.checkIdentity('check the store after a watch resumed').catch((error: unknown) => {
          if (continuity.halted() === undefined) throw error;
        }),
    });
    this.membership = new EtcdMembership({
      ns: this.#ns,
      leaseSeconds: o.leaseSeconds,
      call,
      continuity,
      verifyIdentity: () => this.#verifyIdentity(),
      // The node's own SQLite keeps its addresses: what is written back is its claims (onAccept).
      republish: (node) => this.#republish(node),
      recovery: new EtcdRecovery({ ns: this.#ns, call }),
      holders: () => this.claimHolders(),
      follow: (what, key) => this.#watches.watch(what, key, false),
      notice: o.notice,
    });
    this.#claims = new EtcdTierClaims(this.#kv);
    this.spaces = new EtcdTierSpaces(this.#kv);
    this.#requests = new EtcdTierRequests(this.#kv, this.#watches);
    this.#publications = new EtcdTierPublications(this.#kv);
    this.history = new EtcdHistory(client, this.#ns, { ...o, timeout }, call);
  }

  pinRange(record: RangeRecord): Promise<RangeRecord> {
    return this.#claims.pinRange(record);
  }

  claim(range: RangeRecord, key: string, node: string): Promise<BlockClaim | undefined> {
    return this.#claims.claim(range, key, node);
  }

  claimOf(key: string): Promise<BlockClaim | undefined> {
    return this.#claims.claimOf(key);
  }

  moveClaim(claim: BlockClaim, state: ClaimState): Promise<BlockClaim | undefined> {
    return this.#claims.moveClaim(claim, state);
  }

  claimsOf(node: string, pool?: string): Promise<BlockClaim[]> {
    return this.#claims.claimsOf(node, pool);
  }

  watchClaims(node: string): ClusterWatch<ClaimsSeen> {
    return this.#watches.claims(node);
  }

  watchSpaces(): ClusterWatch<SpacesSeen> {
    return this.#watches.spaces();
  }

  watchPublications(node: string): PublicationsWatch {
    return this.#watches.publications(node);
  }

  claimHolders(): Promise<string[]> {
    return this.#claims.claimHolders();
  }

  claimsIn(pool: string, page?: { limit: number; continue?: string }): Promise<Page<BlockClaim>> {
    return this.#claims.claimsIn(pool, page);
  }

  unclaim(claim: BlockClaim): Promise<UnclaimResult> {
    return this.#claims.unclaim(claim);
  }

  publish(block: PublishedBlock): Promise<void> {
    return this.#publications.publish(block);
  }

  withdraw(key: string, node: string): Promise<void> {
    return this.#publications.withdraw(key, node);
  }

  publicationOf(key: string): Promise<PublishedBlock | undefined> {
    return this.#publications.publicationOf(key);
  }

  published(
    filter: { pool?: string; node?: string },
    page?: { limit: number; continue?: string },
  ): Promise<Page<PublishedBlock>> {
    return this.#publications.published(filter, page);
  }

  ask(pool: string, node: string, wanted: number): Promise<AddressRequest> {
    return this.#requests.ask(pool, node, wanted);
  }

  requestOf(pool: string, node: string): Promise<AddressRequest | undefined> {
    return this.#requests.requestOf(pool, node);
  }

  openRequests(pool?: string): Promise<AddressRequest[]> {
    return this.#requests.openRequests(pool);
  }

  requestsLentBy(lender: string): Promise<AddressRequest[]> {
    return this.#requests.requestsLentBy(lender);
  }

  updateRequest(
    request: AddressRequest,
    grants: readonly Grant[],
    wanted: number,
  ): Promise<AddressRequest | undefined> {
    return this.#requests.updateRequest(request, grants, wanted);
  }

  /**
   * Checks at start that the store is the one this agent knew (its identity record: creating it in a
   * store that never had one); a store that lost its data halts the tier here, before anything is
   * written. Nothing is thrown for a halt: `membership.halted()` says it.
   */
  async verifyStore(): Promise<void> {
    await this.#verifyIdentity();
  }

  /** Sets what an accept of a store that lost its data writes back: the node's claims (tiered.ts). */
  onAccept(republish: (node: string) => Promise<AcceptReport>): void {
    this.#republish = republish;
  }

  /** Moves this node's blocks from the old one-tier layout into `local` (legacy-import.ts). */
  importLegacy(local: Store, node: string): Promise<LegacyReport> {
    return importLegacy({ kv: this.#kv, tier: this, local, node });
  }

  /** What is left of the old one-tier layout (legacy-import.ts), for `warren doctor`. */
  legacyLeft(): ReturnType<typeof legacyLeft> {
    return legacyLeft(this.#kv);
  }

  /** Removes the old documents of `node`, gone for good (legacy-import.ts): before its claims are freed. */
  async forgetLegacyNode(node: string): Promise<void> {
    await forgetLegacyNode(this.#kv, node);
  }

  async ping(): Promise<void> {
    // Refused while halted; halts on a response gone backwards or an identity record gone.
    this.#kv.refuseWhileHalted();
    // The watches of the identity and the announcement live, and the lease kept alive: etcd
    // answered just now, and the identity is the one known; nothing to send.
    if (this.membership.followed()) return;
    await this.#kv.checkIdentity('ping');
  }

  watchRequests(scope: RequestScope, listener?: (change: RequestChange) => void): RecordView<AddressRequest> {
    return this.#requests.view(scope, listener);
  }

  async close(): Promise<void> {
    this.#requests.stopWatching();
    this.#watches.close();
    await this.membership.withdraw();
    this.#client.close();
  }
}
