/**
 * What `warren reservations` and `warren doctor` say of the reservations
 * (src/agent/server/reservation-reports.ts, src/cli/doctor/reservation-checks.ts): the ranges a
 * reservation covers and whether it holds one back whole, the status by node, and the findings.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DoctorFacts } from '../../../src/api/doctor.ts';
import { coversOf, reservationReports } from '../../../src/agent/server/reservation-reports.ts';
import { reservationFindings } from '../../../src/cli/doctor/reservation-checks.ts';
import type { LedgerSummary } from '../../../src/store/store.ts';

const range = (pool: string, subnet: string, first: string, last: string): LedgerSummary => ({
  ledger: pool,
  revision: 1,
  allocated: 0,
  resting: 0,
  description: { subnet, first, last, capacity: '0', cooldownSeconds: 0 },
});
const POOLS: LedgerSummary[] = [
  range('net/10.0.0.0/29', '10.0.0.0/29', '10.0.0.1', '10.0.0.6'),
  range('net/fd00::/120', 'fd00::/120', 'fd00::1', 'fd00::ff'),
  { ledger: 'net/10.0.0.0/29#10.0.0.0/30', revision: 1, allocated: 0, resting: 0 },
];

describe('reservation reports', () => {
  it('count what a reservation holds of each range, each address once, and say when it is the whole span', () => {
    assert.deepEqual(coversOf({ name: 'r', addresses: ['10.0.0.2', '10.0.0.0/30', 'fd00::9'] }, POOLS), [
      { pool: 'net/10.0.0.0/29', subnet: '10.0.0.0/29', reserved: '3', whole: false },
      { pool: 'net/fd00::/120', subnet: 'fd00::/120', reserved: '1', whole: false },
    ]);
    assert.deepEqual(coversOf({ name: 'all', addresses: ['10.0.0.0/29'] }, POOLS), [
      { pool: 'net/10.0.0.0/29', subnet: '10.0.0.0/29', reserved: '6', whole: true },
    ]);
    assert.deepEqual(coversOf({ name: 'none', addresses: ['192.0.2.1'] }, POOLS), []);
  });

  it('list the nodes where reserved addresses are in use, by name, and the entries that reserve nothing', () => {
    const [report] = reservationReports(
      [
        {
          reservation: { name: 'r', reason: 'why', addresses: ['10.0.0.2', 'bogus'] },
          inUse: {
            n2: { count: 1, addresses: [{ address: '10.0.0.2', containerID: 'c', network: 'net' }] },
            n1: { count: 0, addresses: [] },
          },
        },
      ],
      POOLS,
    );
    assert.deepEqual(report?.malformed, ['bogus']);
    assert.deepEqual(
      report?.inUse.map((n) => n.node),
      ['n2'],
    );
    assert.equal(report?.reason, 'why');
  });
});

describe("doctor's reservation findings", () => {
  const facts = (reservations: DoctorFacts['reservations']) => ({ reservations }) as DoctorFacts;
  it('flags a reservation that holds a whole range back as an error, and entries that reserve nothing', () => {
    const findings = reservationFindings(
      facts({
        count: 2,
        wholeRanges: [{ reservation: 'all', pool: 'net/10.0.0.0/29', subnet: '10.0.0.0/29' }],
        malformed: ['r: bogus'],
      }),
    );
    assert.deepEqual(
      findings.map((f) => [f.id, f.severity]),
      [
        ['reservation-covers-range', 'error'],
        ['reservation-entry-malformed', 'warning'],
      ],
    );
    assert.match(findings[0]?.title ?? '', /WarrenReservation all holds back the whole range 10\.0\.0\.0\/29/);
  });

  it('says all is well with sound reservations, and nothing without any', () => {
    assert.deepEqual(
      reservationFindings(facts({ count: 1, wholeRanges: [], malformed: [] })).map((f) => f.severity),
      ['ok'],
    );
    assert.deepEqual(reservationFindings(facts(undefined)), []);
  });
});
