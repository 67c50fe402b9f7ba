/**
 * What an ADD asks of the allocator and what it gets back: the request, the assignment of one
 * address per range, the record stored for it, and how requested addresses are matched to ranges.
 * Pure: no I/O.
 */
import type { Allocation, Owner } from '../ipam/allocation.ts';
import { type IPAddress, formatIP } from '../ipam/address.ts';
import { type RangeSpec, inSubnet } from '../ipam/range.ts';
import { WarrenError } from '../core/errors.ts';
import type { Moment } from '../core/moment.ts';

export interface AllocateRequest {
  readonly owner: Owner;
  readonly ranges: readonly RangeSpec[];
  /** Addresses asked for (CNI_ARGS IP=, runtimeConfig ips); each must fall in one range. */
  readonly requested?: readonly IPAddress[];
  readonly cooldownSeconds?: number;
  readonly podNamespace?: string;
  readonly podName?: string;
  readonly podUID?: string;
  readonly netns?: string;
  /**
   * The holder the address belongs to (ipam/holding-key.ts), when not the pod alone: the first ADD
   * for it allocates as usual and makes the holding; later ADDs, on any node, get the held address.
   */
  readonly holding?: string;
}

export interface Assignment {
  readonly range: RangeSpec;
  readonly allocation: Allocation;
  /** False when the address was already held by this owner (a retried ADD). */
  readonly fresh: boolean;
}

/** The outcome of one decide-and-commit round in a range. */
export type Decision =
  | { readonly kind: 'done'; readonly assignment: Assignment }
  /** No address free where this round looked. */
  | { readonly kind: 'full' }
  /**
   * The store moved under the round: decide again. `admissionLost`: the range's admission was
   * retired by another process (admission.ts), so admit it again first. `wait`: first wait for
   * something other nodes send (lending's grants) OUTSIDE the range's locks, until the wait that
   * began at `since` (monotonic ms; one ADD's waits share it) is over; false: nothing came.
   */
  | {
      readonly kind: 'conflict';
      readonly admissionLost?: true;
      readonly wait?: (since: number) => Promise<boolean>;
    };

/** The record of a new allocation of `address` in `span` (the range or one of its blocks). */
export function recordOf(
  span: RangeSpec,
  address: bigint,
  request: AllocateRequest,
  node: string,
  now: Moment,
): Allocation {
  const a: { -readonly [K in keyof Allocation]: Allocation[K] } = {
    pool: span.pool,
    address: formatIP({ family: span.family, value: address }),
    network: request.owner.network,
    containerID: request.owner.containerID,
    ifname: request.owner.ifname,
    node,
    createdAt: now.wall,
  };
  if (now.stamp !== undefined) a.createdStamp = now.stamp;
  if (request.podNamespace !== undefined) a.podNamespace = request.podNamespace;
  if (request.podName !== undefined) a.podName = request.podName;
  if (request.podUID !== undefined) a.podUID = request.podUID;
  if (request.netns !== undefined) a.netns = request.netns;
  return a;
}

/** Assigns each requested address to the one range that can hold it. */
export function matchRequested(
  ranges: readonly RangeSpec[],
  requested: readonly IPAddress[],
): Map<RangeSpec, IPAddress> {
  const out = new Map<RangeSpec, IPAddress>();
  for (const ip of requested) {
    const range = ranges.find((r) => r.family === ip.family && inSubnet(r, ip));
    if (range === undefined) {
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `requested address ${formatIP(ip)} is in none of the configured ranges ` +
          `(${ranges.map((r) => r.subnet).join(', ')})`,
      );
    }
    if (out.has(range))
      throw new WarrenError(
        'ADDRESS_UNAVAILABLE',
        `two requested addresses fall in range ${range.subnet}; one per range is allowed`,
      );
    out.set(range, ip);
  }
  return out;
}

/**
 * How many times one ADD waits for other nodes (a conflict's `wait`, all within one deadline)
 * before reporting the range full: grants that came may go to other ADDs under way meanwhile, and
 * a block given back may be claimed by another node first (16, not 4: under a burst on a tiny range
 * each answer wakes every wait of the node, and 4 refused ADDs while addresses were still coming,
 * issue 36; the deadline is what bounds the ADD).
 */
export const MAX_WAITS = 16;

/** A round's answer: wait for `until` outside the range's locks, then decide again (false: nothing came). */
export class Waiting {
  readonly until: (since: number) => Promise<boolean>;
  constructor(until: (since: number) => Promise<boolean>) {
    this.until = until;
  }
}
