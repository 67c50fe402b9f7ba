/**
 * The failed CNI calls the dashboard lists (src/agent/metrics/failure-history.ts): counted by
 * command, code and network, the latest kept newest first, and bounded whatever callers send: a
 * flood of network names is counted under `(other)` past the bound, and long texts are cut.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ManualClock } from '../../../src/core/clock.ts';
import { FailureHistory, MAX_TEXT, OTHER_NETWORK } from '../../../src/agent/metrics/failure-history.ts';

const call = (network: string, code = 11, message = 'no free address') => ({
  command: 'ADD',
  code,
  network,
  message,
  containerID: 'c1',
});

describe('FailureHistory', () => {
  test('counts by command, code and network, most first, and keeps the latest newest first with their time', () => {
    const clock = new ManualClock(Date.parse('2025-03-04T10:00:00Z'));
    const h = new FailureHistory(clock, 2);
    h.cniFailed(call('a'));
    clock.advance(1_000);
    h.cniFailed(call('b', 7, 'ipam.range: "x" is not a CIDR'));
    clock.advance(1_000);
    h.cniFailed(call('a'));
    assert.deepEqual(h.counts(), [
      { command: 'ADD', code: 11, network: 'a', count: 2 },
      { command: 'ADD', code: 7, network: 'b', count: 1 },
    ]);
    assert.deepEqual(
      h.recent().map((f) => [f.at, f.network, f.code]),
      [
        ['2025-03-04T10:00:02.000Z', 'a', 11],
        ['2025-03-04T10:00:01.000Z', 'b', 7],
      ],
    );
  });

  test('stays bounded: networks past the bound counted as (other), long texts cut, the ring trimmed', () => {
    const h = new FailureHistory(new ManualClock(0), 10, 3);
    for (let i = 0; i < 1_000; i++) h.cniFailed(call(`net-${i}`, 11, 'x'.repeat(10_000)));
    const counts = h.counts();
    assert.equal(counts.length, 4, 'three networks and (other)');
    assert.deepEqual(counts[0], { command: 'ADD', code: 11, network: OTHER_NETWORK, count: 997 });
    const recent = h.recent();
    assert.equal(recent.length, 10);
    assert.ok(recent.every((f) => f.message.length === MAX_TEXT && f.message.endsWith('…')));
  });
});
