/**
 * The keys of the release pipeline's ordered retry queue: one per holder of addresses, so intents
 * about one holder run one at a time and in order. An owner (network, container ID, interface) is
 * keyed by the shared owner key; a container and a pod by their IDs. The prefixes keep the three
 * apart, and say which backoff a key takes and which keys the containerd status lists.
 */
import { type Owner, ownerKey } from '../../ipam/allocation.ts';
import { type ReleaseIntent, addressHolderOf } from './intent.ts';

const OWNER = 'owner:';
const CONTAINER = 'container:';
const POD = 'pod:';

/** Intents that only say "look again": one queued per key is enough. */
const LOOK_AGAIN: ReadonlySet<ReleaseIntent['kind']> = new Set(['netns-gone', 'namespace-recheck']);

export function isLookAgain(intent: ReleaseIntent): boolean {
  return LOOK_AGAIN.has(intent.kind);
}

/** The key of everything queued for an owner. */
export function ownerQueueKey(owner: Owner): string {
  return OWNER + ownerKey(owner);
}

/** The key of everything queued for a container (its runtime's events). */
export function containerQueueKey(containerID: string): string {
  return CONTAINER + containerID;
}

/** The key of everything queued for a pod, by its UID. */
export function podQueueKey(podUID: string): string {
  return POD + podUID;
}

/** The container ID of a container key; undefined for an owner's or a pod's. */
export function containerOfKey(key: string): string | undefined {
  return key.startsWith(CONTAINER) ? key.slice(CONTAINER.length) : undefined;
}

/** The key an intent is queued under: its holder's. */
export function keyOf(intent: ReleaseIntent): string {
  const holder = addressHolderOf(intent);
  switch (holder.kind) {
    case 'owner':
      return ownerQueueKey(holder.owner);
    case 'container':
      return containerQueueKey(holder.containerID);
    case 'pod':
      return podQueueKey(holder.podUID);
    default: {
      const never: never = holder;
      throw new Error(`unhandled holder ${JSON.stringify(never)}`);
    }
  }
}
