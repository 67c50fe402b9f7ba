/**
 * This node's announcement (its Lease, lease-membership.ts) and the store's state object
 * (cluster-state.ts), watched while the node is announced, so that what happens to them is known as
 * it happens instead of at the next renewal (a third of the lease: 100 s by default): each is one
 * watch of one object (tier-watches.ts `one`, field selector `metadata.name`: listed once, then
 * watched from the version reached, listed again only after 410 Gone), no periodic request.
 *
 * What a change of the Lease means (`verdictOf`, pure):
 * - held by another instance: this node's name was taken over ('taken-over');
 * - deleted while this instance's lease time runs: nobody but this agent removes it then, so the API
 *   server lost it ('gone'); deleted after it lapsed, nothing (the next renewal announces again);
 * - a change older than this instance's last write of the Lease (its resourceVersion), or held by
 *   this instance, means nothing: events come in order, so an older one is from before that write.
 */
import type { KubeClusterState } from './cluster-state.ts';
import type { CollectionChange } from './collection-watch.ts';
import { revisionOf } from './continuity.ts';
import { type LeaseView, leaseOf } from './lease-objects.ts';
import { nodeLeaseName } from './names.ts';
import type { Resource } from './resources.ts';
import type { KubeTierWatches } from './tier-watches.ts';

export type LeaseVerdict = 'taken-over' | 'gone' | undefined;

/** What `change` of this node's Lease means to `instance`, which last wrote it as `held`, at `now`. */
export function verdictOf(
  change: CollectionChange<LeaseView>,
  held: LeaseView,
  instance: string,
  now: number,
): LeaseVerdict {
  const lease = change.type === 'deleted' ? change.previous : change.value;
  const [seen, last] = [revisionOf(lease.version), revisionOf(held.version)];
  if (seen === undefined || last === undefined || seen < last) return undefined;
  if (change.type === 'deleted') return held.expires > now ? 'gone' : undefined;
  return lease.holder === instance ? undefined : 'taken-over';
}

export interface AnnouncementWatchOptions {
  readonly watches: KubeTierWatches;
  readonly leases: Resource;
  readonly state: KubeClusterState;
}

/**
 * Watches `node`'s Lease and the state object; `seen` is told each change of the Lease. Returns
 * what stops both.
 */
export function watchAnnouncement(
  o: AnnouncementWatchOptions,
  node: string,
  seen: (change: CollectionChange<LeaseView>, name: string) => void,
): () => void {
  o.state.follow(o.watches);
  const name = nodeLeaseName(node);
  const watched = o.watches.one(o.leases, `the announcement of node ${node}`, name, leaseOf);
  watched.listen((change) => seen(change, name));
  return () => {
    watched.close();
    o.state.unfollow();
  };
}
