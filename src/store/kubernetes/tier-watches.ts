/**
 * The watches of the Kubernetes tier (tier.ts: `ClusterTier.watchClaims`, `watchSpaces`), each a
 * KubeCollectionWatch (collection-watch.ts: listed once, then watched from the resourceVersion
 * reached, listed again only after 410 Gone) seen through the contract's `ClusterWatch`:
 * - a node's claims: the WarrenBlocks labelled with its node (`warren.dev/node`), so what it
 *   reads and is sent grows with that node's blocks; a block relabelled or deleted leaves it;
 * - a node's publications: the WarrenBlockPublications labelled with its node, told to `onGone` as
 *   each is deleted (or becomes another node's), so what it reads and is sent grows with that node's
 *   blocks; the owner's own writes come back as events it ignores (no request);
 * - the address spaces: every WarrenAddressSpace, unselected (one object per network name and
 *   family, a handful, written only when a range is admitted), one watch however many spaces the
 *   node uses, so a space first used later needs no watch of its own;
 * - one named object (`one`, a field selector `metadata.name=<name>`): this node's Lease and the
 *   store's state object, which membership follows (lease-membership.ts, cluster-state.ts);
 * - `reachable`: whether one of them is synced and open, its answer's head arrived (collection-watch.ts
 *   `watching`, not `opening`: a watch being opened again says nothing of the server yet), which
 *   says the API server answered it (the tier's ping then sends nothing).
 * `seen` answers undefined while its watch is not synced and open or being opened again from the
 * version reached (listing, backing off after a failure, closed): the reader asks the API server
 * instead.
 */
import type { Clock } from '../../core/clock.ts';
import type { BlockClaim, ClaimsSeen, ClusterWatch, PublicationsWatch, SpacesSeen } from '../tiered/cluster-tier.ts';
import { type CollectionChange, type CollectionWatchStatus, KubeCollectionWatch } from './collection-watch.ts';
import { NODE_LABEL, labelValue, selectorOf, spaceName } from './names.ts';
import { admittedOf, claimOfObject, metaOf, publishedOf } from './objects.ts';
import type { Resource } from './resources.ts';

/** An address space's record as the watch keeps it. */
interface SpaceSeen {
  readonly ranges: readonly string[];
  readonly version: number;
}

function spaceOfObject(object: unknown): SpaceSeen | undefined {
  const ranges = admittedOf(object);
  const meta = metaOf(object);
  return ranges === undefined || meta === undefined ? undefined : { ranges, version: Number(meta.resourceVersion) };
}

/** The watch as the contract sees it: what it shows while open and synced, its changes, its end. */
function contractOf<T, S>(
  watch: KubeCollectionWatch<T>,
  seen: (w: KubeCollectionWatch<T>) => S,
  closed: () => void,
): ClusterWatch<S> {
  return {
    seen: () => (isCurrent(watch) ? seen(watch) : undefined),
    onChange: (listener) => watch.listen(() => listener()),
    close: () => {
      watch.close();
      closed();
    },
  };
}

/** A watch of one object, as membership uses it: its changes, whether it is live, its end. */
export interface OneWatched<T> {
  listen(listener: (change: CollectionChange<T>) => void): () => void;
  /** Synced, and open or being opened again from where it was: it misses no change of the object. */
  live(): boolean;
  close(): void;
}

/** What the tier asks of any of its watches, whatever it holds. */
interface Watched {
  status(): CollectionWatchStatus;
  close(): void;
}

/** Synced and open, its answer's head arrived: the API server answered it just now. */
function isLive(watch: Watched): boolean {
  const { synced, state } = watch.status();
  return synced && state === 'watching';
}

/**
 * Synced and open or being opened again from the version reached: its copy misses no change (a
 * watch resumed from there delivers every later one), though the server may not be answering.
 */
function isCurrent(watch: Watched): boolean {
  const { synced, state } = watch.status();
  return synced && (state === 'watching' || state === 'opening');
}

export class KubeTierWatches {
  readonly #clock: Clock;
  readonly #open = new Set<Watched>();

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Watches `node`'s claims in `blocks` (WarrenBlocks). */
  claims(blocks: Resource, node: string): ClusterWatch<ClaimsSeen> {
    const watch = new KubeCollectionWatch<BlockClaim>({
      resource: blocks,
      what: `the blocks of node ${node}`,
      selectors: { labelSelector: selectorOf({ [NODE_LABEL]: labelValue(node) }) },
      decode: (object) => {
        const claim = claimOfObject(object);
        return claim?.node === node ? claim : undefined;
      },
      clock: this.#clock,
    });
    return this.#opened(watch, (w) => ({ claims: w.values(), version: Number(w.status().resourceVersion ?? 0) }));
  }

  /** Watches `node`'s publications in `publications` (WarrenBlockPublications): each one gone, by block key. */
  publications(publications: Resource, node: string): PublicationsWatch {
    const watch = new KubeCollectionWatch<string>({
      resource: publications,
      what: `the publications of node ${node}`,
      selectors: { labelSelector: selectorOf({ [NODE_LABEL]: labelValue(node) }) },
      decode: (object) => {
        const published = publishedOf(object);
        return published?.node === node ? published.key : undefined;
      },
      clock: this.#clock,
    });
    const { close } = this.#opened(watch, () => undefined);
    return {
      onGone: (listener) =>
        watch.listen((change) => (change.type === 'deleted' ? listener(change.previous) : undefined)),
      close,
    };
  }

  /** Watches every address space in `spaces` (WarrenAddressSpaces). */
  spaces(spaces: Resource): ClusterWatch<SpacesSeen> {
    const watch = new KubeCollectionWatch<SpaceSeen>({
      resource: spaces,
      what: 'the address spaces',
      decode: spaceOfObject,
      clock: this.#clock,
    });
    return this.#opened(watch, (w) => ({
      admitted: (space: string) => w.get(spaceName(space)) ?? { ranges: [], version: 0 },
    }));
  }

  /** Watches the one object `name` of `resource` (a field selector), held as `decode` makes it. */
  one<T>(resource: Resource, what: string, name: string, decode: (object: unknown) => T | undefined): OneWatched<T> {
    const watch = new KubeCollectionWatch<T>({
      resource,
      what,
      selectors: { fieldSelector: `metadata.name=${name}` },
      decode,
      clock: this.#clock,
    });
    this.#open.add(watch);
    watch.start();
    return {
      listen: (listener) => watch.listen(listener),
      live: () => isCurrent(watch),
      close: () => {
        watch.close();
        this.#open.delete(watch);
      },
    };
  }

  #opened<T, S>(watch: KubeCollectionWatch<T>, seen: (w: KubeCollectionWatch<T>) => S): ClusterWatch<S> {
    this.#open.add(watch);
    watch.start();
    return contractOf(watch, seen, () => this.#open.delete(watch));
  }

  /** Whether a watch is synced and open (its answer's head arrived): the API server answered it. */
  reachable(): boolean {
    return [...this.#open].some(isLive);
  }

  close(): void {
    for (const watch of this.#open) watch.close();
    this.#open.clear();
  }
}
