/**
 * What the agent reports of its own setup for `warren doctor`: the clock against a real etcd
 * member (with this node's clock set ahead, and over mutual TLS), a member that does not answer,
 * and where the namespaces its allocations recorded lie.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Clock, systemClock } from '../../../src/core/clock.ts';
import { doctorFacts, etcdClockSkew } from '../../../src/agent/server/doctor-facts.ts';
import { resolveAgentOptions } from '../../../src/agent/settings/options.ts';
import { NetnsObserver } from '../../../src/sources/netns.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { type EtcdCluster, freePort, makeTls, startEtcd } from '../../helpers/etcd.ts';
import { tempDir } from '../../helpers/processes.ts';

const ahead = (ms: number): Clock => ({
  now: () => Date.now() + ms,
  monotonic: systemClock.monotonic,
  boot: systemClock.boot,
  setTimer: systemClock.setTimer,
});

describe('the clock against etcd', () => {
  let etcd: EtcdCluster;
  let secure: EtcdCluster;
  let tls: Awaited<ReturnType<typeof makeTls>>;

  before(async () => {
    tls = await makeTls();
    [etcd, secure] = await Promise.all([startEtcd(1), startEtcd(1, tls)]);
  });
  after(async () => {
    await Promise.all([etcd?.stop(), secure?.stop()]);
  });

  it('reads no skew when the clocks agree, within the resolution it states', async () => {
    const skew = await etcdClockSkew(etcd.endpoints[0] as string, {}, systemClock);
    assert.ok('skewMs' in skew, JSON.stringify(skew));
    assert.ok(skew.resolutionMs >= 500);
    assert.ok(Math.abs(skew.skewMs) <= skew.resolutionMs, JSON.stringify(skew));
  });

  it('reads a node ten seconds ahead as ten seconds ahead', async () => {
    const skew = await etcdClockSkew(etcd.endpoints[0] as string, {}, ahead(10_000));
    assert.ok('skewMs' in skew, JSON.stringify(skew));
    assert.ok(Math.abs(skew.skewMs - 10_000) <= skew.resolutionMs, JSON.stringify(skew));
  });

  it("reads the clock of a member that wants a client certificate, with the agent's CA, certificate and key", async () => {
    const skew = await etcdClockSkew(
      secure.endpoints[0] as string,
      { etcdCa: tls.ca, etcdCert: tls.clientCert, etcdKey: tls.clientKey },
      ahead(-5_000),
    );
    assert.ok('skewMs' in skew, JSON.stringify(skew));
    assert.ok(Math.abs(skew.skewMs + 5_000) <= skew.resolutionMs, JSON.stringify(skew));
  });

  it('says why when the member does not answer, instead of failing', async () => {
    const endpoint = `http://127.0.0.1:${await freePort()}`;
    const skew = await etcdClockSkew(endpoint, {}, systemClock);
    assert.ok('error' in skew);
    assert.match(skew.error, /could not read etcd's clock: .*ECONNREFUSED/);
    assert.equal(skew.endpoint, endpoint);
  });
});

describe('doctor facts', () => {
  it("groups this node's allocations by the netns directory their namespace lies in, outside all, or unrecorded", async () => {
    const dir = tempDir('warren-facts-');
    const options = resolveAgentOptions(
      { stateDir: dir, netnsDirs: '/var/run/netns', nodeName: 'n1', metricsAddress: '' },
      {},
      0,
      '/',
    );
    const store = new SqliteStore({ path: ':memory:' });
    try {
      const at = 1_000;
      const allocation = (id: string, netns?: string) => ({
        op: 'allocate' as const,
        allocation: {
          network: 'n',
          containerID: id,
          ifname: 'eth0',
          address: `10.0.0.${id.length + Number(id.at(-1))}`,
          pool: '10.0.0.0/24',
          node: 'n1',
          createdAt: at,
          ...(netns === undefined ? {} : { netns }),
        },
      });
      const read = await store.readLedger('10.0.0.0/24');
      assert.ok('revision' in read);
      const committed = await store.commit('10.0.0.0/24', read.revision, [
        allocation('a1', '/var/run/netns/cni-1'),
        allocation('a2', '/var/run/netns/cni-2'),
        allocation('a3', '/proc/123/ns/net'),
        allocation('a4'),
      ]);
      assert.equal(committed.kind, 'committed');
      const facts = await doctorFacts({
        options,
        store,
        observer: new NetnsObserver(options.netnsDirs),
        clock: systemClock,
        version: '0.0.0',
      });
      assert.deepEqual(facts.recordedNetns, [
        { dir: '/var/run/netns', allocations: 2, example: '/var/run/netns/cni-1' },
        { allocations: 1, example: '/proc/123/ns/net' },
        { unrecorded: true, allocations: 1 },
      ]);
      assert.deepEqual(facts.store, {
        kind: 'sqlite',
        description: store.description,
        healthy: true,
        synchronous: 'FULL',
      });
      assert.equal(facts.journalDir, options.journalDir);
      assert.equal(facts.clockSkew, undefined);
    } finally {
      await store.close();
    }
  });

  it("says when only node-local configs are served, with the config derived from the node's own CIDR", async () => {
    const options = resolveAgentOptions({ stateDir: tempDir('warren-facts-'), metricsAddress: '' }, {}, 0, '/');
    const store = new SqliteStore({ path: ':memory:' });
    try {
      const deps = { options, store, observer: new NetnsObserver([]), clock: systemClock, version: '0.0.0' };
      assert.equal((await doctorFacts(deps)).nodeLocalOnly, undefined, 'not said when every config is served');
      assert.deepEqual((await doctorFacts({ ...deps, nodeLocalOnly: () => undefined })).nodeLocalOnly, {});
      const derived = { network: 'podnet', pools: ['10.244.1.0/24'] };
      assert.deepEqual((await doctorFacts({ ...deps, nodeLocalOnly: () => derived })).nodeLocalOnly, { derived });
    } finally {
      await store.close();
    }
  });
});
