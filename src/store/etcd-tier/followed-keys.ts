/**
 * What an announced node follows by watch instead of reading it at every upkeep run
 * (membership.ts): the store's identity record, its own announcement and the cluster's recovery
 * marker, each one key watched by EtcdKeyWatch (key-watch.ts: read once, then watched from there).
 * The marker's changes are handed to the recovery (recovery.ts `seen`) as they come.
 *
 * Guarantees: `live` is true only while the identity and announcement watches are synced, the
 * identity they show is the one this agent verified, and the lease's last keep-alive was answered
 * (etcd answers this node now): then their copies stand for a read. Anything else (a watch cut or
 * resumed but not verified, an identity changed or gone, keep-alives failing) is not live, and the
 * caller reads, as it did before it followed anything.
 */
import type { EtcdKeyWatch } from './key-watch.ts';
import { IDENTITY_KEY } from './identity.ts';
import { RECOVERY_KEY } from './recovery.ts';

/** A started watch of one key under the prefix (tier-watches.ts `watch`). */
export type FollowKey = (what: string, key: string) => EtcdKeyWatch;

export class FollowedKeys {
  readonly #identity: EtcdKeyWatch;
  readonly #announcement: EtcdKeyWatch;
  readonly #recovery: EtcdKeyWatch;
  readonly #announcementKey: string;

  constructor(follow: FollowKey, node: string, announcementKey: string, seen: (marker: Buffer | undefined) => void) {
    this.#announcementKey = announcementKey;
    this.#recovery = follow('the recovery marker', RECOVERY_KEY);
    this.#recovery.listen((change) => seen(change.type === 'put' ? change.kv.value : undefined));
    this.#identity = follow('the store identity', IDENTITY_KEY);
    this.#announcement = follow(`the announcement of node ${node}`, announcementKey);
  }

  /** See the header: `identity` is the one this agent verified, `keptAlive` its lease's last answer. */
  live(identity: string | undefined, keptAlive: boolean): boolean {
    const shown = this.#identity.get(IDENTITY_KEY)?.value.toString('utf8');
    return keptAlive && this.#identity.synced && this.#announcement.synced && shown !== undefined && shown === identity;
  }

  /** The announcement as its watch shows it (while `live`). */
  announcement(): ReturnType<EtcdKeyWatch['get']> {
    return this.#announcement.get(this.#announcementKey);
  }

  /** Whether the recovery marker's watch is synced: `recovery.current()` is what etcd holds. */
  recoveryFollowed(): boolean {
    return this.#recovery.synced;
  }
}
