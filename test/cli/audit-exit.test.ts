/**
 * `warren audit`'s exit code, for scripts and cron jobs: 0 when every allocation is healthy (or
 * --fix released what was stale), 3 when something stale or suspect is left to look at, 1 when a
 * release of --fix failed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Allocation, AuditReport } from '../../src/api/protocol.ts';
import { AUDIT_EXIT, auditExit } from '../../src/cli/allocation-commands.ts';

const allocation = (address: string): Allocation => ({
  pool: '10.0.0.0/24',
  address,
  network: 'n',
  containerID: `c-${address}`,
  ifname: 'eth0',
  node: 'n1',
  createdAt: 0,
});

function report(findings: AuditReport['findings'], more: Partial<AuditReport> = {}): AuditReport {
  return {
    at: '2026-11-27T00:00:00.000Z',
    counts: { healthy: 0, stale: 0, suspect: 0 },
    findings,
    sources: { journal: { dir: '/j', pending: 0 }, netns: [{ dir: '/var/run/netns', observable: true }] },
    ...more,
  } as AuditReport;
}

const healthy = { allocation: allocation('10.0.0.2'), verdict: { kind: 'healthy', reason: 'netns exists' } };
const stale = { allocation: allocation('10.0.0.3'), verdict: { kind: 'stale', proof: 'netns-gone', reason: 'gone' } };
const suspect = {
  allocation: allocation('10.0.0.4'),
  verdict: { kind: 'suspect', why: 'unobservable', unobservableBecause: '/x', reason: 'cannot see /x' },
};

describe('warren audit exit codes', () => {
  it('is 0 when every allocation is healthy, and when there is none', () => {
    assert.equal(auditExit(report([healthy] as AuditReport['findings'])), AUDIT_EXIT.clean);
    assert.equal(auditExit(report([])), 0);
  });

  it('is 3 when a stale allocation is left (no --fix) or a suspect one, unobservable included', () => {
    assert.equal(auditExit(report([healthy, stale] as AuditReport['findings'])), 3);
    assert.equal(auditExit(report([suspect] as AuditReport['findings'])), 3);
  });

  it('is 0 after --fix released every stale one, 3 while a suspect one is left, 1 when a release failed', () => {
    const fixed = { released: [stale.allocation], errors: [] };
    assert.equal(auditExit(report([healthy, stale] as AuditReport['findings'], fixed)), 0);
    assert.equal(auditExit(report([stale, suspect] as AuditReport['findings'], fixed)), 3);
    const failed = { released: [], errors: ['10.0.0.3 (c): store away'] };
    assert.equal(auditExit(report([stale] as AuditReport['findings'], failed)), 1);
  });
});
