/**
 * Readiness in process, composed by the agent's own servingParts and release functions: the CNI service's
 * STATUS and the status route over an in-memory SQLite store whose commits fail on demand while
 * its ping goes on succeeding (what a nearly full disk does: test/e2e/store-faults.test.ts shows
 * it on a real tmpfs), with the commit health watching the store the allocator commits through,
 * on a manual clock.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { CommitHealth } from '../../src/agent/server/commit-health.ts';
import { servingParts } from '../../src/agent/server/serving.ts';
import { silentLogger } from '../helpers/logger.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { WarrenError } from '../../src/core/errors.ts';
import type { CommitResult, Store } from '../../src/store/store.ts';
import { FaultyStore } from '../api/harness.ts';
import { releaseHarness } from './release/harness.ts';

const DISK_FULL = new WarrenError(
  'IO_FAILURE',
  'database /var/lib/warren/warren.db: the disk is full (database or disk is full); free space where it lives',
);

async function setup() {
  const clock = new ManualClock(Date.parse('2030-01-01T00:00:00Z'));
  const faulty = new FaultyStore({ path: ':memory:' });
  const commits = new CommitHealth(clock);
  const store = commits.watch(faulty);
  const release = await releaseHarness(clock, store, { node: 'n1' });
  const { service, cni } = servingParts({
    options: release.options,
    storeKind: 'sqlite',
    store,
    allocator: release.allocator,
    clock,
    logger: silentLogger,
    version: '0.0.0-test',
    reconciler: release.reconciler,
    commits,
    beforeAdd: (owner, podUID) => release.pipeline.applyPending(owner, podUID),
    runtimeOf: (a) => release.scopes.adapterOf(a),
    // What is asserted is the answers; an unexpected failure would show in them.
    onFailure: () => undefined,
    onError: () => undefined,
  });
  const config = { cniVersion: '1.1.0', name: 'ready', ipam: { type: 'warren', range: '10.241.0.0/24' } };
  return {
    clock,
    faulty,
    service,
    add: (containerID: string, ipam: Record<string, unknown> = {}) =>
      cni.handle({
        command: 'ADD',
        containerID,
        netns: '/var/run/netns/r',
        ifname: 'eth0',
        config: { ...config, ipam: { ...config.ipam, ...ipam } },
      }),
    cniStatus: () => cni.handle({ command: 'STATUS', config }),
    close: async () => {
      await release.done();
      await faulty.close();
    },
  };
}

type Setup = Awaited<ReturnType<typeof setup>>;
const opened: Setup[] = [];
const open = async () => {
  const s = await setup();
  opened.push(s);
  return s;
};

/** The CNI error code and message of an outcome, or 0 for a success. */
const codeOf = (outcome: Awaited<ReturnType<Setup['add']>>): { code: number; msg: string } =>
  outcome.kind === 'error' ? { code: outcome.output.code, msg: outcome.output.msg } : { code: 0, msg: '' };

describe('readiness: whether an ADD can commit now', () => {
  after(async () => {
    for (const s of opened) await s.close();
  });

  it('STATUS does not say ready while ADDs fail to commit though the ping still succeeds, and says why', async () => {
    const s = await open();
    assert.equal(codeOf(await s.add('a1')).code, 0);
    assert.equal(codeOf(await s.cniStatus()).code, 0);
    s.faulty.commitFault = DISK_FULL;
    const failed = codeOf(await s.add('a2'));
    assert.equal(failed.code, 5, failed.msg);
    await s.faulty.ping(); // the store's own write probe goes on succeeding
    const status = codeOf(await s.cniStatus());
    assert.equal(status.code, 50, 'a runtime must not be told ready while every ADD fails');
    assert.match(status.msg, /a commit failed: .*the disk is full/);
    const body = await s.service.status();
    assert.equal(body.ready, false);
    assert.match(body.notReady ?? '', /the disk is full/);
    assert.equal(body.store.healthy, false);
    assert.match(body.store.error ?? '', /the disk is full/);
    assert.equal(body.allocations, 1, 'a store whose commits fail can still be read');
  });

  it('stays not ready once the disk has room until a commit succeeds, then is ready', async () => {
    const s = await open();
    s.faulty.commitFault = DISK_FULL;
    assert.equal(codeOf(await s.add('b1')).code, 5);
    s.faulty.commitFault = undefined;
    assert.equal(
      codeOf(await s.cniStatus()).code,
      50,
      'a ping is smaller than the commit that failed: it proves nothing about it',
    );
    assert.equal(codeOf(await s.add('b1')).code, 0);
    assert.equal(codeOf(await s.cniStatus()).code, 0);
    assert.equal((await s.service.status()).ready, true);
  });

  it('a node that gets no ADD while not ready comes back on trial after 30 s, and a failed trial waits longer', async () => {
    const s = await open();
    s.faulty.commitFault = DISK_FULL;
    assert.equal(codeOf(await s.add('t1')).code, 5);
    s.clock.advance(29_999);
    assert.equal(codeOf(await s.cniStatus()).code, 50);
    s.clock.advance(1);
    assert.equal(
      codeOf(await s.cniStatus()).code,
      0,
      'on trial: a runtime that sends no ADD to a node that is not ready would wait for ever',
    );
    s.faulty.pingFault = DISK_FULL;
    assert.equal(codeOf(await s.cniStatus()).code, 50, 'on trial only while the ping succeeds');
    s.faulty.pingFault = undefined;
    assert.equal(codeOf(await s.add('t1')).code, 5, 'the trial: the disk is still full');
    s.clock.advance(30_000);
    assert.equal(codeOf(await s.cniStatus()).code, 50, 'a failed trial doubles the wait');
    s.clock.advance(30_000);
    assert.equal(codeOf(await s.cniStatus()).code, 0);
    s.faulty.commitFault = undefined;
    assert.equal(codeOf(await s.add('t1')).code, 0);
    s.faulty.commitFault = DISK_FULL;
    assert.equal(codeOf(await s.add('t2')).code, 5);
    s.clock.advance(30_000);
    assert.equal(codeOf(await s.cniStatus()).code, 0, 'a commit that succeeded starts the waits over');
  });

  it('a wall clock stepped back a day after a failed commit does not keep the node not ready for a day (the wait runs on the monotonic clock)', async () => {
    const s = await open();
    s.faulty.commitFault = DISK_FULL;
    assert.equal(codeOf(await s.add('w1')).code, 5);
    s.clock.stepWall(-86_400_000);
    s.clock.advance(30_000);
    assert.equal(codeOf(await s.cniStatus()).code, 0, 'on trial after 30 s, whatever the wall clock did');
    s.faulty.commitFault = undefined;
  });

  it("a refused config, a conflict and a caller's mistake leave the agent ready", async () => {
    const s = await open();
    assert.equal(codeOf(await s.add('r1', { range: '10.241.0.0/33' })).code, 7);
    assert.equal(codeOf(await s.cniStatus()).code, 0);
    const clock = new ManualClock(0);
    const health = new CommitHealth(clock);
    const answers: Array<CommitResult | Error> = [
      { kind: 'conflict', reason: 'moved' },
      new WarrenError('BAD_REQUEST', 'not a store failure'),
    ];
    const store = health.watch({
      description: 'scripted',
      commit: async () => {
        const next = answers.shift() as CommitResult | Error;
        if (next instanceof Error) throw next;
        return next;
      },
    } as unknown as Store);
    assert.deepEqual(await store.commit('p', 1, []), { kind: 'conflict', reason: 'moved' });
    await assert.rejects(store.commit('p', 1, []), /not a store failure/);
    assert.equal(health.problem(), undefined);
  });
});
