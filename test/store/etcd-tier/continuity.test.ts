/**
 * What the store has seen of etcd, and when that says the store is no longer the one it was: the
 * revision floor is what was seen when a request left (a response to a request sent before another
 * completed may be older than that one), another cluster halts, and the first reason stands.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KVClient, Namespace } from 'etcd3';
import { EtcdContinuity } from '../../../src/store/etcd-tier/continuity.ts';
import { verifyIdentity } from '../../../src/store/etcd-tier/identity.ts';
import { TierKv } from '../../../src/store/etcd-tier/kv.ts';

const header = (revision: number, cluster = 'c1') => ({ cluster_id: cluster, revision: String(revision) });

describe('EtcdContinuity', () => {
  it('a response older than one that completed before its request left halts; one merely overtaken does not', () => {
    const c = new EtcdContinuity(() => 7);
    c.observe(header(10), c.floor());
    const sentEarly = c.floor(); // 10
    c.observe(header(12), c.floor()); // a request sent and answered meanwhile
    c.observe(header(11), sentEarly); // the early request's answer arrives late: legitimate
    assert.equal(c.halted(), undefined);
    c.observe(header(3), c.floor());
    assert.equal(c.halted()?.kind, 'store-lost');
    assert.match(c.halted()?.message ?? '', /revision 3, lower than revision 12 .*went backwards.*warren store accept/);
    assert.equal(c.halted()?.at, 7);
  });

  it('a response from another cluster halts, and the first reason stands until accepted', () => {
    const c = new EtcdContinuity();
    c.observe(header(5, 'a'), 0);
    c.observe(header(6, 'b'), c.floor());
    assert.match(c.halted()?.message ?? '', /cluster b, not cluster a/);
    c.halt('taken-over', 'another reason');
    assert.equal(c.halted()?.kind, 'store-lost', 'the first halt stands');
    c.identity = 'id-1';
    c.accept();
    assert.equal(c.halted(), undefined);
    assert.equal(c.identity, undefined, 'accept forgets the old store');
    c.observe(header(1, 'b'), c.floor());
    assert.equal(c.halted(), undefined, 'after accept, the present store is the one');
  });

  it('a call sent before the operator accepted the store and answered after it does not halt it again', async () => {
    const c = new EtcdContinuity();
    c.observe(header(6), 0);
    c.observe(header(1), c.floor()); // the store wiped: halted
    let answer!: (value: { header: ReturnType<typeof header> }) => void;
    // A watch resumed on the wiped store checks it: its read is in flight as the operator accepts.
    const inFlight = c.call(
      'etcd tier',
      'check the store after a watch resumed',
      () => new Promise((r) => (answer = r)),
    );
    c.accept();
    answer({ header: header(1) });
    await inFlight;
    assert.equal(c.halted(), undefined, 'the accepted store stands');
    await c.call('etcd tier', 'read', async () => ({ header: header(2) }));
    assert.equal(c.floor(), 2, 'calls sent after the accept count');
  });

  it('an identity check whose read was out while the operator accepted the store does not halt it again', async () => {
    const c = new EtcdContinuity();
    c.identity = 'id-old';
    let answer!: (value: { kvs: never[] }) => void;
    // A watch resumed on the wiped store checks its identity: the read is in flight as the operator accepts.
    const ns = { get: () => ({ exec: () => new Promise((r) => (answer = r)) }) } as unknown as Namespace;
    const check = verifyIdentity({
      ns,
      call: (_what, body) => body(),
      continuity: c,
      where: 'etcd test',
      key: '/p/identity',
    });
    c.accept();
    answer({ kvs: [] });
    await check;
    assert.equal(c.halted(), undefined, 'the accepted store stands: the identity known before it says nothing');
  });

  it("a commit's identity check whose read was out while the operator accepted the store does not halt it again", async () => {
    const c = new EtcdContinuity();
    c.identity = 'id-old';
    let answer!: (value: { kvs: never[]; header: ReturnType<typeof header> }) => void;
    const kv = { range: () => new Promise((r) => (answer = r)) } as unknown as KVClient;
    const check = new TierKv(kv, '/p/', c).checkIdentity('read the store identity');
    c.accept();
    answer({ kvs: [], header: header(1) });
    await check;
    assert.equal(c.halted(), undefined, 'the accepted store stands');
  });

  it('a revision a watch showed raises the floor and never halts', () => {
    const c = new EtcdContinuity();
    c.observe(header(6), 0);
    c.saw(9);
    c.saw(3);
    assert.equal(c.halted(), undefined);
    assert.equal(c.floor(), 9);
  });
});
