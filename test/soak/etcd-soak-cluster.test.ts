/**
 * The etcd soak's reads (etcd-soak-cluster.ts) run again what a member killed or an election fails,
 * and nothing else: the errors are the etcd3 library's own, made here as its client makes them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GRPCDeadlineExceededError, GRPCUnavailableError } from 'etcd3';
import { passingReadError } from './etcd-soak-cluster.ts';

describe('passingReadError', () => {
  it('runs again a read a member killed failed (UNAVAILABLE: the run died on it at etcd seed 3943 step 4171)', () => {
    const refused = new GRPCUnavailableError(
      '14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:35595.',
    );
    assert.equal(passingReadError(refused), true);
    assert.equal(passingReadError(new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED')), true);
    assert.equal(passingReadError({ isBrokenCircuitError: true }), true, "the client's circuit breaker, open");
  });

  it('throws any other error at once', () => {
    assert.equal(passingReadError(new Error('the snapshot file is gone')), false);
    assert.equal(passingReadError(new TypeError('a bug')), false);
    assert.equal(passingReadError(undefined), false);
  });
});
