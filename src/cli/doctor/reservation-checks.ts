/**
 * The cluster-wide reservations the agent watches (WarrenReservation), judged: one that holds back
 * every allocatable address of a range is an error (no pod gets an address there: every ADD is
 * refused as the range full); an entry that is neither an address nor a CIDR is a warning (it
 * reserves nothing, which its author did not mean). Pure.
 */
import type { DoctorFacts } from '../../api/doctor.ts';
import { type Finding, error, ok, warning } from './finding.ts';

export function reservationFindings(facts: DoctorFacts): Finding[] {
  const r = facts.reservations;
  if (r === undefined || r.count === 0) return [];
  const findings: Finding[] = r.wholeRanges.map((w) =>
    error(
      'reservation-covers-range',
      `WarrenReservation ${w.reservation} holds back the whole range ${w.subnet}` +
        (w.pool === w.subnet ? '' : ` (${w.pool})`),
      'every allocatable address of the range is reserved: each ADD there is refused as the range full',
      `narrow the reservation (kubectl edit warrenreservation ${w.reservation}) to the addresses meant, or ` +
        "remove the range from the network's config",
    ),
  );
  if (r.malformed.length > 0)
    findings.push(
      warning(
        'reservation-entry-malformed',
        `${r.malformed.length} reservation entr${r.malformed.length === 1 ? 'y reserves' : 'ies reserve'} nothing`,
        `neither an address nor a CIDR: ${r.malformed.join(', ')}`,
        'write each entry of spec.addresses as an address (10.0.0.5, fd00::5) or a CIDR (10.0.1.0/28)',
      ),
    );
  if (findings.length === 0)
    findings.push(
      ok(
        'reservations-sound',
        `${r.count} reservation${r.count === 1 ? '' : 's'} watched`,
        'none holds back a whole range; every entry is an address or a CIDR',
      ),
    );
  return findings;
}
