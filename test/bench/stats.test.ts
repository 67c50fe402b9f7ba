/**
 * The benches' percentiles say how many samples they stand on: a "p99" of 100 calls was the
 * slowest call, quoted as if it were a percentile (issue 25 item 10).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeTail, quantile, samplesFor, supports, tail } from '../../bench/stats.ts';

const oneTo = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);

describe('bench percentiles', () => {
  it('does not quote a p99 from 100 samples: it quotes their maximum, with n', () => {
    const t = tail(oneTo(100), 0.99);
    assert.deepEqual(t, { label: 'max', value: 100, n: 100 });
    assert.equal(describeTail(t), 'max 100.0 ms (n=100)');
  });

  it('quotes a p99 from 1,000 samples, with 10 beyond it', () => {
    const t = tail(oneTo(1_000), 0.99);
    assert.equal(t.label, 'p99');
    assert.equal(t.n, 1_000);
    assert.equal(oneTo(1_000).filter((x) => x > t.value).length, 10);
  });

  it('quotes a p90 from 100 samples but not from 99', () => {
    assert.equal(tail(oneTo(100), 0.9).label, 'p90');
    assert.equal(tail(oneTo(99), 0.9).label, 'max');
    assert.equal(samplesFor(0.9), 100);
    assert.equal(samplesFor(0.99), 1_000);
  });

  it('quotes a median from any number of samples', () => {
    assert.equal(supports(3, 0.5), true);
    assert.equal(quantile([3, 1, 2], 0.5), 2);
  });
});
