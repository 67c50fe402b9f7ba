/**
 * The first half of planning a move from whereabouts (pure, no I/O): from whereabouts' objects as
 * listed, the addresses it holds, each placed in the Warren range pool the agent will use for it.
 *
 * An IPPool belongs to the network configs (NetworkAttachmentDefinitions) whose range it was
 * named after (whereabouts-names.ts); its addresses go to the range pool Warren's own parser
 * (cni/ipam-config.ts) gives that range, so a migrated address lands in exactly the pool the
 * agent allocates from once the definition says `warren`. Reservations
 * (OverlappingRangeIPReservation) are whereabouts' second record of the same addresses: one its
 * IPPools lost is held from the reservation; one naming another pod than its IPPool is reported.
 *
 * Guarantees: nothing here throws on what the cluster holds; an object that cannot be read, an
 * IPPool no definition configures, a reservation that fits no range or two (but nested ranges of
 * one network_name: those keep one reservation of an address, which is theirs alike), and
 * whereabouts disagreeing with itself are each a `Problem` naming the object, and their addresses
 * are not held; every holding names one range pool and one address, and no address is held twice
 * in one address space (ranges of one network_name, allocator/admission.ts `addressSpaceOf`): two
 * nested ranges holding it for two attachments is a clash, as in one range.
 */
import { addressSpaceOf } from '../../allocator/admission.ts';
import { defined } from '../../core/defined.ts';
import { isWarrenError, messageOf } from '../../core/errors.ts';
import { type Cidr, type IPAddress, contains, formatIP, networkOf, parseCidr } from '../../ipam/address.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import { ipPoolName, readReservationName, sliceNodeOf } from './whereabouts-names.ts';
import {
  type AttachmentDefinition,
  type PodRef,
  type Reservation,
  type WhereaboutsPool,
  parseAttachmentDefinition,
  parseIpPool,
  parseReservation,
} from './whereabouts-objects.ts';

/** One address whereabouts holds, placed in a Warren range pool. */
export interface Holding {
  /**
   * Warren's range pool key (ipam/pool-key.ts) of the range that holds it; once placed
   * (serving-pools.ts), the pool serving the address.
   */
  readonly pool: string;
  readonly address: string;
  readonly containerID: string;
  readonly pod?: PodRef;
  readonly ifname?: string;
  /** The object that holds it (`IPPool ns/name` or the reservation). */
  readonly source: string;
  /** The definitions configuring the range: the attachment is one of theirs. */
  readonly definitions: readonly AttachmentDefinition[];
}

/** Something in whereabouts' objects that keeps addresses from being migrated. */
export interface Problem {
  readonly object: string;
  readonly message: string;
}

export interface Holdings {
  readonly holdings: readonly Holding[];
  readonly problems: readonly Problem[];
  /** The definitions read (those configuring whereabouts' keys). */
  readonly definitions: readonly AttachmentDefinition[];
}

export interface WhereaboutsObjects {
  readonly ipPools: readonly unknown[];
  readonly reservations: readonly unknown[];
  readonly definitions: readonly unknown[];
}

interface ConfiguredRange {
  readonly range: RangeSpec;
  readonly networkName: string;
  readonly definitions: AttachmentDefinition[];
}

function problemOf(error: unknown, fallback: string): Problem {
  const message = messageOf(error);
  // The readers' messages start with the object; the split keeps it a column of its own.
  const colon = isWarrenError(error) ? message.indexOf(': ') : -1;
  return colon < 0
    ? { object: fallback, message }
    : { object: message.slice(0, colon), message: message.slice(colon + 2) };
}

function subnetOf(range: Cidr): Cidr {
  return { address: { family: range.address.family, value: networkOf(range) }, length: range.length };
}

function cidrOf(range: RangeSpec): Cidr {
  return { address: { family: range.family, value: range.network }, length: range.prefixLength };
}

/** Every range the definitions configure, one entry per Warren range pool. */
function configuredRanges(definitions: readonly AttachmentDefinition[]): ConfiguredRange[] {
  const byPool = new Map<string, ConfiguredRange>();
  for (const definition of definitions) {
    for (const range of definition.ipam.ranges) {
      const held = byPool.get(range.pool);
      if (held === undefined)
        byPool.set(range.pool, { range, networkName: definition.ipam.networkName, definitions: [definition] });
      else held.definitions.push(definition);
    }
  }
  return [...byPool.values()];
}

/**
 * The configured range an IPPool belongs to: the one it is named after (`[<network_name>-]<range>`),
 * or, for a node slice (`[<network_name>-]<node>-<slice>`), the one range holding the slice.
 */
function rangeOfPool(pool: WhereaboutsPool, ranges: readonly ConfiguredRange[]): ConfiguredRange | Problem {
  const subnet = subnetOf(pool.range);
  const exact = ranges.filter(
    (r) =>
      r.range.family === subnet.address.family &&
      r.range.network === subnet.address.value &&
      r.range.prefixLength === subnet.length &&
      ipPoolName(pool.rangeText, r.networkName) === pool.name,
  );
  const slices = ranges.filter(
    (r) =>
      r.range.prefixLength < subnet.length &&
      contains(cidrOf(r.range), subnet.address) &&
      sliceNodeOf(pool.name, pool.rangeText, r.networkName) !== undefined,
  );
  const found = exact.length > 0 ? exact : slices;
  const [only] = found;
  if (only !== undefined && found.length === 1) return only;
  if (found.length === 0)
    return {
      object: pool.ref,
      message:
        `no NetworkAttachmentDefinition with whereabouts' keys configures ${pool.rangeText} under this name: ` +
        `its ${pool.allocations.length} addresses are not migrated`,
    };
  return {
    object: pool.ref,
    message: `fits the ranges of several networks (${found.map((r) => r.range.pool).join(', ')}): not migrated`,
  };
}

/** The configured range of network `networkName` holding `address`. */
function rangeHolding(address: IPAddress, networkName: string, ranges: readonly ConfiguredRange[]) {
  return ranges.filter((r) => r.networkName === networkName && contains(cidrOf(r.range), address));
}

const sameOwner = (a: Holding, b: { containerID?: string; pod?: PodRef }): boolean =>
  (b.containerID === undefined || a.containerID === b.containerID) &&
  (a.pod === undefined || b.pod === undefined || (a.pod.namespace === b.pod.namespace && a.pod.name === b.pod.name));

/** Reads whereabouts' objects into the addresses to migrate and the problems met. */
export function collectHoldings(objects: WhereaboutsObjects): Holdings {
  const problems: Problem[] = [];
  const definitions: AttachmentDefinition[] = [];
  objects.definitions.forEach((object, i) => {
    try {
      const definition = parseAttachmentDefinition(object, i);
      if (definition !== undefined) definitions.push(definition);
    } catch (error) {
      problems.push(problemOf(error, `NetworkAttachmentDefinition #${i + 1}`));
    }
  });
  const ranges = configuredRanges(definitions);
  const held = new Map<string, Holding>();
  const clashes = new Set<string>();
  /** Where an address of `range` is held: its address space's, nested ranges of one network_name alike. */
  const keyOf = (range: RangeSpec, address: string): string => `${addressSpaceOf(range)}\n${address}`;
  const hold = (range: RangeSpec, holding: Holding): void => {
    const key = keyOf(range, holding.address);
    const before = held.get(key);
    if (before === undefined) held.set(key, holding);
    else if (!sameOwner(before, holding)) {
      clashes.add(key);
      problems.push({
        object: holding.source,
        message: `${holding.address} is also held by ${before.source} for another attachment: not migrated`,
      });
    }
  };

  objects.ipPools.forEach((object, i) => {
    let pool: WhereaboutsPool;
    try {
      pool = parseIpPool(object, i);
    } catch (error) {
      problems.push(problemOf(error, `IPPool #${i + 1}`));
      return;
    }
    const range = rangeOfPool(pool, ranges);
    if (!('range' in range)) {
      if (pool.allocations.length > 0) problems.push(range);
      return;
    }
    for (const a of pool.allocations) {
      hold(range.range, {
        pool: range.range.pool,
        address: formatIP(a.address),
        containerID: a.containerID,
        ...defined({ pod: a.pod, ifname: a.ifname }),
        source: pool.ref,
        definitions: range.definitions,
      });
    }
  });

  const networkNames = new Set(ranges.map((r) => r.networkName));
  objects.reservations.forEach((object, i) => {
    let reservation: Reservation;
    try {
      reservation = parseReservation(object, i);
    } catch (error) {
      problems.push(problemOf(error, `OverlappingRangeIPReservation #${i + 1}`));
      return;
    }
    const readings = readReservationName(reservation.name, networkNames).flatMap((reading) =>
      rangeHolding(reading.address, reading.networkName, ranges).map((range) => ({ ...reading, range })),
    );
    // Nested ranges of one network_name keep one reservation of an address: it reads as theirs alike.
    const spaces = new Set(readings.map((r) => keyOf(r.range.range, formatIP(r.address))));
    const inner = readings.reduce<(typeof readings)[number] | undefined>(
      (found, r) => (found === undefined || r.range.range.prefixLength > found.range.range.prefixLength ? r : found),
      undefined,
    );
    if (inner === undefined || spaces.size > 1) {
      problems.push({
        object: reservation.ref,
        message:
          inner === undefined
            ? 'its name is no address of a range the NetworkAttachmentDefinitions configure: not migrated'
            : `its name reads as addresses of several ranges (${readings.map((r) => r.range.range.pool).join(', ')})`,
      });
      return;
    }
    const address = formatIP(inner.address);
    const key = keyOf(inner.range.range, address);
    const before = held.get(key);
    if (before !== undefined) {
      // The usual case: the reservation repeats what the IPPool holds.
      if (!sameOwner(before, reservation)) {
        clashes.add(key);
        problems.push({
          object: reservation.ref,
          message: `names another attachment than ${before.source} does for ${address}: not migrated`,
        });
      }
      return;
    }
    if (reservation.containerID === undefined) {
      problems.push({ object: reservation.ref, message: `no containerid: ${address} cannot be given an owner` });
      return;
    }
    hold(inner.range.range, {
      pool: inner.range.range.pool,
      address,
      containerID: reservation.containerID,
      ...defined({ pod: reservation.pod, ifname: reservation.ifname }),
      source: reservation.ref,
      // Any of the nested ranges' definitions may hold it: the pod's network-status says which (plan.ts).
      definitions: [...new Set(readings.flatMap((r) => r.range.definitions))],
    });
  });

  const holdings = [...held.entries()].filter(([key]) => !clashes.has(key)).map(([, holding]) => holding);
  return { holdings, problems, definitions };
}

/** Whether `text` names an address inside `cidr` text (for callers checking a grant's block). */
export function cidrHolds(cidrText: string, address: IPAddress): boolean {
  const cidr = parseCidr(cidrText);
  return cidr !== undefined && contains(cidr, address);
}
