/**
 * The cluster's IPAMClaims (`k8s.cni.cncf.io/v1alpha1`, KubeVirt's persistent IPs; namespaced), as
 * an ADD and the claim upkeep need them: served from a list-watch of every namespace's claims, and
 * fetched with one GET only when the watch has not brought the claim (yet).
 *
 * Guarantees:
 * - a claim the watch holds is answered without any API request: the common ADD path costs none;
 * - on a miss the claim is read with one GET; a claim that does not exist answers undefined (and
 *   is not remembered: it may be created a moment later);
 * - a listing replaces everything; ADDED and MODIFIED replace one claim, DELETED removes it. The
 *   names that left the cache are answered to the caller (`observe`), so the upkeep can end their
 *   holding: a claim deleted (its event) while no newer claim of its name stands, or a name missing
 *   from a listing (deleted while the watch was away). A holding follows the claim's name, as
 *   KubeVirt names a VM's claims after the VM: a claim deleted and made again under its name before
 *   this agent saw it go is the same holder;
 * - objects without a namespace, name or uid, or whose spec names no network, are skipped (the
 *   CRD's schema requires spec.network; an object without one was not made by its API).
 */
import { isPlainObject } from '../../../core/validate.ts';
import type { ListWatchItem } from '../../../sources/kubernetes/list-watch.ts';

/** The API group, version and plural of IPAMClaims. */
export const IPAMCLAIM_GROUP = 'k8s.cni.cncf.io';
export const IPAMCLAIM_VERSION = 'v1alpha1';
/** Every namespace's IPAMClaims: what the agent lists and watches. */
export const IPAMCLAIMS_PATH = '/apis/k8s.cni.cncf.io/v1alpha1/ipamclaims';

export interface ClaimRef {
  readonly namespace: string;
  readonly name: string;
}

export interface ClaimView extends ClaimRef {
  readonly uid: string;
  /** spec.network: the network (the CNI config's name) the claim was made for. */
  readonly network: string;
  /** spec.interface: the pod interface it was made for ('' when unset). */
  readonly interface: string;
  /** spec.ipRequests: the addresses (CIDR form) the claim asks for, one per family. */
  readonly ipRequests: readonly string[];
  /** status.ips as written (CIDR form). */
  readonly ips: readonly string[];
  /** status.ownerPod ('' when unset). */
  readonly ownerPod: string;
  /** metadata.deletionTimestamp is set: deleted, kept by a finalizer (KubeVirt's) a while longer. */
  readonly deleting: boolean;
}

/** The holder key of a claim's addresses (ipam/holding-key.ts's `ipamclaim/<namespace>/<name>`). */
export function claimHolderKey(ref: ClaimRef): string {
  return `ipamclaim/${ref.namespace}/${ref.name}`;
}

const nonEmpty = (value: unknown): value is string => typeof value === 'string' && value !== '';

/** The ClaimView of an IPAMClaim object, or undefined when it lacks what one needs. */
export function claimViewOf(object: unknown): ClaimView | undefined {
  if (!isPlainObject(object) || !isPlainObject(object.metadata)) return undefined;
  const meta = object.metadata;
  if (!nonEmpty(meta.uid) || !nonEmpty(meta.namespace) || !nonEmpty(meta.name)) return undefined;
  const spec = isPlainObject(object.spec) ? object.spec : {};
  if (!nonEmpty(spec.network)) return undefined;
  const status = isPlainObject(object.status) ? object.status : {};
  const strings = (value: unknown): string[] =>
    Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
  return {
    namespace: meta.namespace,
    name: meta.name,
    uid: meta.uid,
    network: spec.network,
    interface: typeof spec.interface === 'string' ? spec.interface : '',
    ipRequests: strings(spec.ipRequests),
    ips: strings(status.ips),
    ownerPod: typeof status.ownerPod === 'string' ? status.ownerPod : '',
    deleting: nonEmpty(meta.deletionTimestamp),
  };
}

const keyOf = (ref: ClaimRef): string => `${ref.namespace}/${ref.name}`;

export interface ClaimCacheOptions {
  /** GET of one claim (the JSON the server sent); undefined when the server answers 404. */
  readonly fetchClaim: (ref: ClaimRef) => Promise<unknown>;
}

export interface ClaimCacheStatus {
  readonly claims: number;
  readonly listed: boolean;
  /** GETs made on a miss since the start. */
  readonly gets: number;
}

export class ClaimCache {
  readonly #o: ClaimCacheOptions;
  /** Claims by namespace/name, as the watch last said. */
  #claims = new Map<string, ClaimView>();
  #listed = false;
  #gets = 0;

  constructor(options: ClaimCacheOptions) {
    this.#o = options;
  }

  /** The claim `ref` names, from the watch, else with one GET; undefined when it does not exist. */
  async claim(ref: ClaimRef): Promise<ClaimView | undefined> {
    const cached = this.#claims.get(keyOf(ref));
    if (cached !== undefined) return cached;
    this.#gets += 1;
    const view = claimViewOf(await this.#o.fetchClaim(ref));
    // Kept: the watch's event for it follows (or a listing replaces it); the next ADD needs no GET.
    if (view !== undefined) this.#claims.set(keyOf(view), view);
    return view;
  }

  /** The claim as the cache holds it now (no request). */
  peek(ref: ClaimRef): ClaimView | undefined {
    return this.#claims.get(keyOf(ref));
  }

  /** Whether the watch has listed: before, the cache cannot say a claim is gone. */
  get listed(): boolean {
    return this.#listed;
  }

  /**
   * An item of the claim watch. Answers the claims that are gone by it: the one deleted, or those
   * a listing no longer holds (deleted while the watch was away).
   */
  observe(item: ListWatchItem<unknown>): ClaimView[] {
    if (item.kind === 'listed') {
      const claims = new Map<string, ClaimView>();
      for (const object of item.objects) {
        const view = claimViewOf(object);
        if (view !== undefined) claims.set(keyOf(view), view);
      }
      const gone = [...this.#claims.values()].filter((c) => !claims.has(keyOf(c)));
      this.#claims = claims;
      this.#listed = true;
      return gone;
    }
    const view = claimViewOf(item.object);
    if (view === undefined) return [];
    const key = keyOf(view);
    if (item.kind !== 'deleted') {
      this.#claims.set(key, view);
      return [];
    }
    const standing = this.#claims.get(key);
    // A newer claim of the name (read by a GET before this event came) holds the name on.
    if (standing !== undefined && standing.uid !== view.uid) return [];
    this.#claims.delete(key);
    return [view];
  }

  status(): ClaimCacheStatus {
    return { claims: this.#claims.size, listed: this.#listed, gets: this.#gets };
  }
}
