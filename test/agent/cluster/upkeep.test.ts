/**
 * The cluster chores on their own interval, on a manual clock: the node is announced at start
 * without holding anything up, announced on a later run when that failed, renewed after; empty
 * blocks are given back on every run; a failing chore is reported and the others still run.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { ClusterUpkeep } from '../../../src/agent/cluster/upkeep.ts';
import { RecentErrors } from '../../../src/agent/metrics/recent-errors.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import type { Membership } from '../../../src/store/store.ts';
import { flush } from '../../helpers/event-loop.ts';
import { silentLogger } from '../../helpers/logger.ts';

describe('ClusterUpkeep', () => {
  it('announces, renews and gives back blocks every interval; a failing chore is reported and the rest still run', async () => {
    const clock = new ManualClock(5_000);
    const calls: string[] = [];
    let announceFails = true;
    let renewFails = false;
    let halted: string | undefined;
    const membership: Membership = {
      announce: async (node, info) => {
        calls.push(`announce ${node} since ${info.since}`);
        if (announceFails) throw new Error('no leader');
      },
      renew: async () => {
        calls.push('renew');
        if (renewFails) throw new Error('lease lost');
      },
      liveNodes: async () => [],
      alive: async () => false,
      withdraw: async () => undefined,
      claimTask: async () => false,
      releaseTask: async () => undefined,
      halted: () => halted,
      recovery: () => undefined,
      keepRecovery: async () => undefined,
      leaveRecovery: async () => undefined,
      accept: async () => {
        calls.push('accept');
        halted = undefined;
        return { addresses: 0, blocks: 0, conflicts: [] };
      },
      identity: () => 'id-1',
    };
    const allocator = {
      returnEmptyBlocks: async (graceMs: number) => {
        calls.push(`give back after ${graceMs}`);
        return { returned: [], errors: [] };
      },
    };
    const logger = silentLogger;
    const errors = new RecentErrors(clock, logger);
    const upkeep = new ClusterUpkeep({
      membership,
      allocator,
      clock,
      logger,
      errors,
      node: 'n1',
      version: 'v',
      intervalMs: 10_000,
      blockGraceMs: 300_000,
    });
    const abort = new AbortController();
    await upkeep.announceFirst();
    upkeep.start(abort.signal);
    await flush();
    assert.deepEqual(calls, ['announce n1 since 5000'], 'announced once before serving; a failure left to the runs');
    assert.match(upkeep.problem() ?? '', /node n1 is not announced in the cluster store yet/);
    announceFails = false;
    clock.advance(10_000);
    await flush();
    assert.deepEqual(
      calls.slice(1),
      ['announce n1 since 15000', 'give back after 300000'],
      'the failed announcement is made on the next run',
    );
    assert.equal(upkeep.problem(), undefined);
    renewFails = true;
    await upkeep.run();
    assert.deepEqual(
      calls.slice(3),
      ['renew', 'give back after 300000'],
      'blocks are given back though the renewal failed',
    );
    assert.deepEqual(
      errors.list().map((e) => e.message),
      ['node announcement failed: lease lost'],
    );
    abort.abort();
    clock.advance(60_000);
    await flush();
    assert.equal(calls.length, 5, 'nothing after the signal');
  });

  it('a halted node writes nothing to the store and says why, until the operator accepts', async () => {
    const clock = new ManualClock(0);
    const calls: string[] = [];
    let halted: string | undefined;
    const membership: Membership = {
      announce: async () => undefined,
      renew: async () => {
        calls.push('renew');
      },
      liveNodes: async () => [],
      alive: async () => false,
      withdraw: async () => undefined,
      claimTask: async () => false,
      releaseTask: async () => undefined,
      halted: () => halted,
      recovery: () => undefined,
      keepRecovery: async () => undefined,
      leaveRecovery: async () => undefined,
      accept: async () => {
        calls.push('accept');
        assert.match(
          upkeep.problem() ?? '',
          /accepting the cluster store/,
          'no ADD while what the node knew is written back',
        );
        halted = undefined;
        return { addresses: 2, blocks: 1, conflicts: [] };
      },
      identity: () => 'id-1',
    };
    const allocator = {
      returnEmptyBlocks: async () => {
        calls.push('give back');
        return { returned: [], errors: [] };
      },
    };
    const logged: string[] = [];
    const logger = pino(
      { level: 'error' },
      { write: (line: string) => logged.push(String((JSON.parse(line) as { msg: string }).msg)) },
    );
    const upkeep = new ClusterUpkeep({
      membership,
      allocator,
      clock,
      logger,
      errors: new RecentErrors(clock, logger),
      node: 'n1',
      version: 'v',
      intervalMs: 10_000,
      blockGraceMs: 1,
    });
    await upkeep.announceFirst();
    halted = 'etcd answered at revision 3, lower than revision 90';
    await upkeep.run();
    await upkeep.run();
    assert.deepEqual(calls, ['renew', 'renew'], 'no block is given back on a store this node stopped trusting');
    assert.equal(upkeep.problem(), halted);
    assert.deepEqual(
      logged,
      ['allocation stopped: etcd answered at revision 3, lower than revision 90'],
      'the halt is logged once',
    );
    assert.deepEqual(await upkeep.accept(), { addresses: 2, blocks: 1, conflicts: [] });
    assert.equal(upkeep.problem(), undefined);
    await upkeep.run();
    assert.deepEqual(calls.slice(2), ['accept', 'renew', 'give back']);
  });
});
