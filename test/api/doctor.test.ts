/**
 * GET /v1/doctor in process, as the other routes are tested (api.test.ts): the real server on a
 * temp socket over `:memory:` SQLite and the manual clock, called through the typed client. What
 * the agent says of its own setup for `warren doctor`: its paths, its store's health and
 * durability, the netns directories it judges, where its allocations' namespaces lie; and a store
 * that does not answer is a finding in the answer, not a failed call.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import type { CniRequest } from '../../src/api/protocol.ts';
import { type Harness, harness } from './harness.ts';

describe('GET /v1/doctor in process', () => {
  let h: Harness;
  before(async () => {
    h = await harness();
  });
  after(async () => {
    await h.close();
  });

  const add = async (containerID: string, netns: string): Promise<void> => {
    const request: CniRequest = {
      command: 'ADD',
      containerID,
      ifname: 'eth0',
      netns,
      config: { cniVersion: '1.1.0', name: 'docnet', ipam: { type: 'warren', range: '10.78.0.0/24' } },
    };
    const outcome = await h.client.cni(request);
    assert.equal(outcome.kind, 'result', JSON.stringify(outcome));
  };

  it("answers the agent's setup: node, version, socket, journal, a healthy SQLite store and its durability", async () => {
    const facts = await h.client.doctor();
    assert.deepEqual(
      [
        facts.node,
        facts.version,
        facts.pid,
        facts.socket,
        facts.journalDir,
        facts.manageCniConfig,
        facts.metrics,
        facts.pluginsDir === undefined,
      ],
      ['n1', '0.0.0-test', process.pid, h.socket, h.journalDir, false, undefined, false],
    );
    assert.deepEqual(facts.store, {
      kind: 'sqlite',
      description: h.store.description,
      healthy: true,
      synchronous: 'FULL',
    });
    assert.equal(facts.clockSkew, undefined, 'no etcd, no clock to compare with');
    assert.equal(facts.containerd, undefined);
  });

  it('names each netns directory it judges and why it cannot observe one that is not a mount point', async () => {
    const [dir, ...others] = (await h.client.doctor()).netns;
    assert.deepEqual(others, []);
    assert.equal(dir?.dir, h.netnsDir);
    assert.equal(dir?.observable, false);
    assert.match(dir?.reason ?? '', /is not a mount point here/);
  });

  it("groups this node's allocations by where their recorded namespace lies: in a judged directory or outside all", async () => {
    await add('doc-in-1', join(h.netnsDir, 'ns-1'));
    await add('doc-in-2', join(h.netnsDir, 'ns-2'));
    await add('doc-out', '/proc/4242/ns/net');
    const { recordedNetns } = await h.client.doctor();
    assert.deepEqual(recordedNetns, [
      { dir: h.netnsDir, allocations: 2, example: join(h.netnsDir, 'ns-1') },
      { allocations: 1, example: '/proc/4242/ns/net' },
    ]);
  });

  it('answers 200 with the store unhealthy, and why, when the store does not answer; nothing is logged as a failure', async () => {
    const failures = h.failures.length;
    h.store.pingFault = new Error('database is locked');
    try {
      const answer = await requestJson({ socket: h.socket, method: 'GET', path: '/v1/doctor' });
      assert.equal(answer.status, 200);
      const facts = answer.body as Awaited<ReturnType<Harness['client']['doctor']>>;
      assert.deepEqual(
        [facts.store.healthy, facts.store.error, facts.recordedNetns],
        [false, 'database is locked', []],
      );
    } finally {
      h.store.pingFault = undefined;
    }
    assert.equal((await h.client.doctor()).store.healthy, true, 'healthy again once the store answers');
    assert.equal(h.failures.length, failures);
  });

  it('takes GET only', async () => {
    assert.deepEqual(await requestJson({ socket: h.socket, method: 'POST', path: '/v1/doctor', body: {} }), {
      status: 405,
      body: { error: { code: 'METHOD_NOT_ALLOWED', message: '/v1/doctor takes GET, not POST' } },
    });
  });
});
