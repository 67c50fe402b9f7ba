/**
 * Cluster-wide reservations as the engine sees them: addresses and CIDRs that are never handed out,
 * in any range that contains them. Pure values and sets, no I/O; who fills it (the agent's watch
 * of WarrenReservation objects) is not its business.
 *
 * Guarantees:
 * - the cost an allocation pays is one Map look-up (`blocking`): the union of a pool's own
 *   exclusions and the reservations inside it is built once per pool and per set of reservations,
 *   and with no reservation at all it is the range's exclusion set itself;
 * - `replace` swaps every reservation at once: a decision sees the old set or the new, never half;
 * - an entry that is neither an address nor a CIDR reserves nothing and is reported (`malformed`),
 *   never guessed at; a CIDR with host bits set (`10.0.0.5/24`) reserves its whole network.
 */
import { type Family, type IPAddress, formatIP, lastOf, networkOf, parseCidr, parseIP } from './address.ts';
import { exclusionSet } from './exclusions.ts';
import type { RangeSpec } from './range.ts';
import { RunSet } from './run-set.ts';

/** One reservation: a name (the object's), why, and what it holds back. */
export interface Reservation {
  readonly name: string;
  readonly reason?: string;
  /** Addresses or CIDRs, as written. */
  readonly addresses: readonly string[];
}

/** One reserved span of addresses and the reservation that names it. */
export interface ReservedSpan {
  readonly family: Family;
  readonly from: bigint;
  readonly to: bigint;
  readonly reservation: Reservation;
}

/** The span an entry of `spec.addresses` names, or undefined when it is neither an address nor a CIDR. */
export function parseReservedEntry(text: string): { family: Family; from: bigint; to: bigint } | undefined {
  if (typeof text !== 'string') return undefined;
  const trimmed = text.trim();
  if (trimmed.includes('/')) {
    const cidr = parseCidr(trimmed);
    return cidr === undefined ? undefined : { family: cidr.address.family, from: networkOf(cidr), to: lastOf(cidr) };
  }
  const ip = parseIP(trimmed);
  return ip === undefined ? undefined : { family: ip.family, from: ip.value, to: ip.value };
}

/** A reservation's entries that are neither addresses nor CIDRs. */
export function malformedEntries(r: Reservation): string[] {
  return r.addresses.filter((a) => parseReservedEntry(a) === undefined);
}

interface Blocking {
  readonly first: bigint;
  readonly last: bigint;
  readonly excluded: RangeSpec['excluded'];
  readonly set: RunSet;
}

export class ReservedAddresses {
  /** Bumped on every replace: caches built for an older set are rebuilt on their next use. */
  #version = 0;
  #reservations: readonly Reservation[] = [];
  /** Every reserved address of each family, merged. */
  #sets: Record<Family, RunSet> = { 4: new RunSet(), 6: new RunSet() };
  /** Per family, in the order of the reservations' names: what names a reserved address. */
  #spans: Record<Family, ReservedSpan[]> = { 4: [], 6: [] };
  /**
   * Per ledger, what blocks it for the current reservations (emptied by replace). Keyed by the
   * pool, not the RangeSpec: a block's span is made afresh on each use; the span and the exclusions
   * (shared by every block of a range) are compared, so a pool whose config changed is rebuilt.
   */
  #blocking = new Map<string, Blocking>();

  get version(): number {
    return this.#version;
  }

  /** No reservation holds any address. */
  get empty(): boolean {
    return this.#sets[4].size === 0n && this.#sets[6].size === 0n;
  }

  /** Every reservation, by name. */
  list(): readonly Reservation[] {
    return this.#reservations;
  }

  /** Makes `reservations` the whole set (the previous ones are gone). */
  replace(reservations: readonly Reservation[]): void {
    const sorted = [...reservations].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const sets: Record<Family, RunSet> = { 4: new RunSet(), 6: new RunSet() };
    const spans: Record<Family, ReservedSpan[]> = { 4: [], 6: [] };
    for (const reservation of sorted) {
      for (const entry of reservation.addresses) {
        const span = parseReservedEntry(entry);
        if (span === undefined) continue;
        sets[span.family].addRange(span.from, span.to);
        spans[span.family].push({ ...span, reservation });
      }
    }
    this.#reservations = sorted;
    this.#sets = sets;
    this.#spans = spans;
    this.#blocking = new Map();
    this.#version += 1;
  }

  has(ip: IPAddress): boolean {
    return this.#sets[ip.family].has(ip.value);
  }

  /** The first reservation (by name) holding `ip` back, or undefined. */
  covering(ip: IPAddress): Reservation | undefined {
    if (!this.has(ip)) return undefined;
    return this.#spans[ip.family].find((s) => ip.value >= s.from && ip.value <= s.to)?.reservation;
  }

  /** Every reservation holding `ip` back. */
  coveringAll(ip: IPAddress): Reservation[] {
    if (!this.has(ip)) return [];
    const spans = this.#spans[ip.family].filter((s) => ip.value >= s.from && ip.value <= s.to);
    return [...new Set(spans.map((s) => s.reservation))];
  }

  /** Every reservation that holds back some address of [from, to] of `family`. */
  overlapping(family: Family, from: bigint, to: bigint): Reservation[] {
    const out = new Set<Reservation>();
    for (const s of this.#spans[family]) if (s.from <= to && s.to >= from) out.add(s.reservation);
    return [...out];
  }

  /**
   * What may never be picked in `range`: its exclusions and the reservations inside its span. The
   * set is the range's exclusion set itself while nothing is reserved.
   */
  blocking(range: RangeSpec): RunSet {
    if (this.empty) return exclusionSet(range);
    const cached = this.#blocking.get(range.pool);
    if (
      cached !== undefined &&
      cached.first === range.first &&
      cached.last === range.last &&
      cached.excluded === range.excluded
    )
      return cached.set;
    const set = new RunSet();
    for (const [a, b] of range.excluded) set.addRange(a, b);
    for (const s of this.#spans[range.family]) {
      const from = s.from < range.first ? range.first : s.from;
      const to = s.to > range.last ? range.last : s.to;
      if (from <= to) set.addRange(from, to);
    }
    this.#blocking.set(range.pool, { first: range.first, last: range.last, excluded: range.excluded, set });
    return set;
  }

  /** How a reservation reads in a refusal: `WarrenReservation "name" (reason)`. */
  static describe(r: Reservation): string {
    return `WarrenReservation "${r.name}"${r.reason === undefined || r.reason === '' ? '' : ` (${r.reason})`}`;
  }
}

/** Reserved addresses of one family as text, for listings: `10.0.0.5`, `10.0.1.0-10.0.1.255`. */
export function formatSpan(s: { family: Family; from: bigint; to: bigint }): string {
  const from = formatIP({ family: s.family, value: s.from });
  return s.from === s.to ? from : `${from}-${formatIP({ family: s.family, value: s.to })}`;
}

/**
 * `range` with the reservations inside its span added to its exclusions (undefined stays
 * undefined): for what reads exclusions itself, such as what a lender grants (allocator/lending/).
 */
export function withReservations(
  range: RangeSpec | undefined,
  reserved: ReservedAddresses | undefined,
): RangeSpec | undefined {
  if (range === undefined || reserved === undefined || reserved.empty) return range;
  const runs = reserved.blocking(range).runs();
  return { ...range, excluded: runs.map(([a, b]) => [a, b] as const) };
}
