/**
 * This node's announcement (its Lease, lease-membership.ts) and the store's state object
 * (cluster-state.ts), watched while the node is announced, so that what happens to them is known as
 * it happens: each is one watch of one object (tier-watches.ts `one`, field selector
 * `metadata.name`: listed once, then watched from the version reached, listed again only after 410
 * Gone), no periodic request. An idle node renews nothing (lease-ping.ts), so this watch, not a
 * renewal, is where it learns that its name was taken or its Lease lost, and where it sees the
 * pings it answers.
 *
 * What a change of the Lease means (`verdictOf`, pure):
 * - held by another instance, or by nobody (vacated by a node that found it gone): this node's name
 *   was taken over ('taken-over');
 * - deleted while this instance holds it, lapsed or not: nobody but this agent removes its Lease
 *   (others take it over by a PUT, or vacate it), so the API server lost it ('gone');
 * - modified to a resourceVersion older than the one the watch held: the object went back, which a
 *   watch never shows of a store that kept its data ('back': restored from an older backup with its
 *   revision bumped, found at a relisting);
 * - a change older than this instance's last write of the Lease (its resourceVersion), or held by
 *   this instance, means nothing more: events come in order, so an older one is from before that
 *   write, and this instance's own may carry a ping to answer.
 */
import type { KubeClusterState } from './cluster-state.ts';
import type { CollectionChange } from './collection-watch.ts';
import { revisionOf } from './continuity.ts';
import { type LeaseView, leaseOf } from './lease-objects.ts';
import { nodeLeaseName } from './names.ts';
import type { Resource } from './resources.ts';
import type { KubeTierWatches } from './tier-watches.ts';

export type LeaseVerdict = 'taken-over' | 'gone' | 'back' | undefined;

/** What `change` of this node's Lease means to `instance`, which last wrote it as `held`. */
export function verdictOf(change: CollectionChange<LeaseView>, held: LeaseView, instance: string): LeaseVerdict {
  if (change.type === 'modified') {
    const [now, before] = [revisionOf(change.value.version), revisionOf(change.previous.version)];
    if (now !== undefined && before !== undefined && now < before) return 'back';
  }
  const lease = change.type === 'deleted' ? change.previous : change.value;
  const [seen, last] = [revisionOf(lease.version), revisionOf(held.version)];
  if (seen === undefined || last === undefined || seen < last) return undefined;
  if (change.type === 'deleted') return 'gone';
  return lease.holder === instance ? undefined : 'taken-over';
}

export interface AnnouncementWatchOptions {
  readonly watches: KubeTierWatches;
  readonly leases: Resource;
  readonly state: KubeClusterState;
}

/** What the holder of the announcement is told of its Lease's changes. */
export interface AnnouncementSeen {
  /** The Lease as this instance holds it; undefined while it holds none (nothing is judged then). */
  held(): LeaseView | undefined;
  /** It is gone, or went back: the API server lost it. */
  lost(name: string, how: string): void;
  /** Held by another instance, or by nobody. */
  takenOver(name: string, lease: LeaseView): void;
  /** A version of its own newer than the one held (a ping written on it): the next write's guard. */
  own(lease: LeaseView): void;
}

/**
 * Watches `node`'s Lease, held by `instance`, and the state object; `seen` is told what each
 * change of the Lease means. Returns what stops both.
 */
export function watchAnnouncement(
  o: AnnouncementWatchOptions,
  node: string,
  instance: string,
  seen: AnnouncementSeen,
): () => void {
  o.state.follow(o.watches);
  const name = nodeLeaseName(node);
  const watched = o.watches.one(o.leases, `the announcement of node ${node}`, name, leaseOf);
  watched.listen((change) => {
    const held = seen.held();
    if (held === undefined) return;
    const verdict = verdictOf(change, held, instance);
    if (verdict === 'gone') return seen.lost(name, 'is gone');
    if (change.type === 'deleted') return;
    if (verdict === 'back' && change.type === 'modified')
      return seen.lost(
        name,
        `is back at resourceVersion ${change.value.version}, older than ${change.previous.version}`,
      );
    if (verdict === 'taken-over') return seen.takenOver(name, change.value);
    if (verdict === undefined && change.value.holder === instance)
      if ((revisionOf(change.value.version) ?? 0) >= (revisionOf(held.version) ?? 0)) seen.own(change.value);
  });
  return () => {
    watched.close();
    o.state.unfollow();
  };
}
