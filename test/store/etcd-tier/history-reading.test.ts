/**
 * What EtcdHistory promises that a real etcd cannot be made to show on demand: a member whose
 * status lags behind what the store has seen never halts the store as gone backwards, and readings
 * reach etcd at most once an interval (on an injected clock), a failed one not kept. The client is
 * a stand-in answering as etcd's maintenance service does; the store's continuity check is the
 * real one, fed as the etcd tier feeds it. Real etcd members: history.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Etcd3, Namespace } from 'etcd3';
import { EtcdContinuity } from '../../../src/store/etcd-tier/continuity.ts';
import { type EtcdCall, EtcdHistory } from '../../../src/store/etcd-tier/history.ts';

const header = (revision: number) => ({ cluster_id: '7', member_id: '1', revision: String(revision), raft_term: '2' });

/** A stand-in for etcd at `revision()`, counting status calls; `fail` makes status throw. */
function standIn(revision: () => number, fail: () => boolean = () => false) {
  const calls = { status: 0 };
  const client = {
    maintenance: {
      status: async () => {
        calls.status += 1;
        if (fail()) throw new Error('14 UNAVAILABLE: no connection');
        return { header: header(revision()), dbSize: '40960', dbSizeInUse: '20480' };
      },
      alarm: async () => ({ header: header(revision()), alarms: [] }),
    },
  } as unknown as Etcd3;
  const ns = {
    get: () => ({ revision: () => ({ exec: async () => null }) }),
  } as unknown as Namespace;
  return { client, ns, calls };
}

/** Runs a call as the etcd tier's does: the answer's header, when it has one, is held to the continuity check. */
function storeCall(continuity: EtcdContinuity): EtcdCall {
  return async (_what, body) => {
    const floor = continuity.floor();
    const result = await body();
    const h = (result as { header?: { cluster_id: string; revision: string } } | undefined)?.header;
    if (typeof h === 'object' && h !== null) continuity.observe(h, floor);
    return result;
  };
}

// Nothing listens on port 9 of loopback: the quota is not read, as with metrics served elsewhere.
const OPTIONS = { endpoints: ['http://127.0.0.1:9'], timeout: 500, historyIntervalMs: 60_000 };

describe("EtcdHistory's readings", () => {
  it('never halts the store as gone backwards when the member answering its status lags behind', async () => {
    const continuity = new EtcdContinuity();
    continuity.observe(header(5_000), 0);
    const { client, ns } = standIn(() => 4_990);
    const reading = await new EtcdHistory(client, ns, OPTIONS, storeCall(continuity)).read();
    assert.equal(reading.revision, 4_990);
    assert.equal(continuity.halted(), undefined, continuity.halted()?.message);
    assert.equal(reading.quotaBytes, undefined, 'no quota where the metrics cannot be read');
    assert.equal(reading.dbSizeInUseBytes, 20_480);
  });

  it('reaches etcd at most once an interval however often it is asked, and again once it has passed', async () => {
    let now = 1_000;
    let revision = 10;
    const { client, ns, calls } = standIn(() => revision);
    const history = new EtcdHistory(client, ns, OPTIONS, storeCall(new EtcdContinuity()), () => now);
    const [a, b] = await Promise.all([history.read(), history.read()]);
    assert.equal(calls.status, 1, 'two asks at once share one reading');
    assert.equal(a, b);
    revision = 20;
    now += 59_999;
    assert.equal((await history.read()).revision, 10);
    assert.equal(calls.status, 1);
    now += 1;
    assert.equal((await history.read()).revision, 20);
    assert.equal(calls.status, 2);
  });

  it('keeps no failed reading: the next ask tries etcd again at once', async () => {
    let failing = true;
    const { client, ns, calls } = standIn(
      () => 10,
      () => failing,
    );
    const history = new EtcdHistory(client, ns, OPTIONS, storeCall(new EtcdContinuity()), () => 0);
    await assert.rejects(history.read(), /UNAVAILABLE/);
    failing = false;
    assert.equal((await history.read()).revision, 10);
    assert.equal(calls.status, 2);
  });
});
