/**
 * What Warren remembers about one handed-out address. Owner identity is the triple
 * (network, containerID, ifname): a retried ADD for the same triple gets the same record back.
 * When it was made is ordered by `createdStamp` where there is one (core/moment.ts), never by two
 * wall-clock readings alone.
 */
import type { BootStamp, Moment } from '../core/moment.ts';

export interface Allocation {
  /** Pool identity (see RangeSpec.pool). */
  readonly pool: string;
  /** Canonical address text. */
  readonly address: string;
  /** The CNI network name (`name` of the network config). */
  readonly network: string;
  readonly containerID: string;
  readonly ifname: string;
  readonly podNamespace?: string;
  readonly podName?: string;
  readonly podUID?: string;
  /** Node whose agent made the allocation. */
  readonly node: string;
  /** Network namespace path given at ADD. */
  readonly netns?: string;
  /** Milliseconds since the epoch, on the wall clock of the agent that made it. */
  readonly createdAt: number;
  /**
   * The boot's monotonic clock when it was made: what orders it against intents (a journaled DEL,
   * a runtime event). Absent in records of older Warrens and on hosts without a boot ID.
   */
  readonly createdStamp?: BootStamp;
}

/**
 * When the allocation was made, as node `here` can order it. On a store several nodes share, the
 * stamp of an allocation another node made is left out: its boot is another host's, which says
 * nothing about this host's boots (core/moment.ts would take it for an earlier boot), so only the
 * wall clock orders it. `here` undefined: every allocation of the store was made on this host.
 */
export function createdMoment(a: Allocation, here?: string): Moment {
  return a.createdStamp === undefined || (here !== undefined && a.node !== here)
    ? { wall: a.createdAt }
    : { wall: a.createdAt, stamp: a.createdStamp };
}

export interface Owner {
  readonly network: string;
  readonly containerID: string;
  readonly ifname: string;
}

/**
 * The owner's identity as one string, for maps and sets keyed by owner: injective (JSON of the
 * triple). Also on disk: the missed-delete journal names an owner too long to spell out by the
 * sha256 of this key (cni/journal-entry.ts), so its encoding never changes.
 */
export function ownerKey(owner: Owner): string {
  return JSON.stringify([owner.network, owner.containerID, owner.ifname]);
}

/** Whether `a` and `b` name one owner (network, containerID and ifname alike). */
export function sameOwner(a: Owner, b: Owner): boolean {
  return a.network === b.network && a.containerID === b.containerID && a.ifname === b.ifname;
}
