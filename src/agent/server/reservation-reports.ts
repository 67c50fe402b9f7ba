/**
 * `warren reservations` (GET /v1/reservations): each WarrenReservation as this agent watches it,
 * with the ranges of its store it holds addresses of (how many of each span, and whether all of
 * it: a range then hands nothing out, which `warren doctor` flags) and, by node, the addresses
 * still in use (the reservation's status). Pure: the caller reads the store's pool summaries.
 */
import { defined } from '../../core/defined.ts';
import { parseIP } from '../../ipam/address.ts';
import { isBlockKey } from '../../ipam/blocks.ts';
import { type Reservation, malformedEntries, parseReservedEntry } from '../../ipam/reserved.ts';
import { RunSet } from '../../ipam/run-set.ts';
import type { NodeInUse, ReservationCover, ReservationReport } from '../../api/protocol.ts';
import type { LedgerSummary } from '../../store/store.ts';

/** A reservation and what every node wrote in its status. */
export interface WatchedReservation {
  readonly reservation: Reservation;
  readonly inUse: Readonly<Record<string, NodeInUse>>;
}

/** The range pools of the summaries that say their span: what a reservation can cover. */
function spans(pools: readonly LedgerSummary[]) {
  return pools.flatMap((p) => {
    const d = p.description;
    if (isBlockKey(p.ledger) || d === undefined) return [];
    const first = parseIP(d.first);
    const last = parseIP(d.last);
    if (first === undefined || last === undefined || first.family !== last.family) return [];
    return [{ pool: p.ledger, subnet: d.subnet, family: first.family, first: first.value, last: last.value }];
  });
}

/** The ranges `r` holds addresses of, and how many. */
export function coversOf(r: Reservation, pools: readonly LedgerSummary[]): ReservationCover[] {
  const sets = { 4: new RunSet(), 6: new RunSet() };
  for (const entry of r.addresses) {
    const span = parseReservedEntry(entry);
    if (span !== undefined) sets[span.family].addRange(span.from, span.to);
  }
  const covers: ReservationCover[] = [];
  for (const range of spans(pools)) {
    let reserved = 0n;
    // Runs never overlap: the clipped lengths add up to the addresses held back, each once.
    for (const [a, b] of sets[range.family].runs()) {
      const from = a > range.first ? a : range.first;
      const to = b < range.last ? b : range.last;
      if (from <= to) reserved += to - from + 1n;
    }
    if (reserved === 0n) continue;
    const whole = reserved === range.last - range.first + 1n;
    covers.push({ pool: range.pool, subnet: range.subnet, reserved: reserved.toString(), whole });
  }
  return covers;
}

export function reservationReports(
  watched: readonly WatchedReservation[],
  pools: readonly LedgerSummary[],
): ReservationReport[] {
  return watched.map(({ reservation, inUse }) => ({
    name: reservation.name,
    ...defined({ reason: reservation.reason }),
    addresses: reservation.addresses,
    malformed: malformedEntries(reservation),
    covers: coversOf(reservation, pools),
    inUse: Object.entries(inUse)
      .filter(([, entry]) => entry.count > 0)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([node, entry]) => ({ node, ...entry })),
  }));
}
