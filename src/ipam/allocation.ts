/**
 * What Warren remembers about one handed-out address. Owner identity is the triple
 * (network, containerID, ifname): a retried ADD for the same triple gets the same record back.
 */

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
  /** Milliseconds since the epoch. */
  readonly createdAt: number;
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
