/**
 * The fake Kubernetes API's lists and watches of custom resources against the answers recorded
 * from a real kube-apiserver (the project's notes on the Kubernetes API, sections 6 and 7), over
 * real HTTPS: selectors, paging over a snapshot, continue tokens, watch projections, the 410 inside
 * the stream, bookmarks and timeouts. Watches are awaited with deadlines; nothing sleeps.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FakeKubeApi } from '../helpers/fake-kube-api.ts';
import { BLOCKS, block, call, eventsAtLeast, openWatch, startedWith } from './kube-wire.ts';

/** b1..b5: node=n1 for b1–b3, node=n2 for b4–b5, idx=<i>. */
async function fiveBlocks(fake: FakeKubeApi): Promise<void> {
  for (let i = 1; i <= 5; i++) {
    const created = await call(fake, 'POST', BLOCKS, {
      body: block(`b${i}`, { idx: String(i), node: i <= 3 ? 'n1' : 'n2' }),
    });
    assert.equal(created.status, 201);
  }
}

const names = (answer: { json: { items: Array<{ metadata: { name: string } }> } }) =>
  answer.json.items.map((item) => item.metadata.name);

describe('fake Kubernetes API: custom resource lists and watches, as recorded', () => {
  it('§6 lists with equality and set-based label selectors and metadata.name field selectors; others are the recorded 400s', async (t) => {
    const fake = await startedWith(t);
    await fiveBlocks(fake);
    const n1 = await call(fake, 'GET', `${BLOCKS}?labelSelector=node%3Dn1`);
    assert.deepEqual(names(n1), ['b1', 'b2', 'b3']);
    assert.deepEqual(Object.keys(n1.json), ['apiVersion', 'items', 'kind', 'metadata']);
    assert.deepEqual(n1.json.metadata, { continue: '', resourceVersion: fake.resourceVersion() });
    assert.equal(n1.json.kind, 'IPAMBlockList');
    const q = (selector: string) => call(fake, 'GET', `${BLOCKS}?labelSelector=${encodeURIComponent(selector)}`);
    assert.deepEqual(names(await q('idx in (1,5),node!=n1')), ['b5']);
    assert.deepEqual(names(await q('idx notin (1,2),node')), ['b3', 'b4', 'b5']);
    assert.deepEqual(names(await q('!node')), []);
    assert.deepEqual(names(await q('node==n2')), ['b4', 'b5']);
    assert.equal(
      (await q('node===x')).text,
      `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"unable to parse requirement: found '=', expected: identifier","reason":"BadRequest","code":400}\n`,
    );
    const byName = (selector: string) => call(fake, 'GET', `${BLOCKS}?fieldSelector=${encodeURIComponent(selector)}`);
    assert.deepEqual(names(await byName('metadata.name=b2')), ['b2']);
    assert.deepEqual(names(await byName('metadata.name!=b2')), ['b1', 'b3', 'b4', 'b5']);
    for (const label of ['spec.affinity', 'metadata.uid', 'metadata.namespace'])
      assert.equal(
        (await byName(`${label}=x`)).text,
        `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"field label not supported: ${label}","reason":"BadRequest","code":400}\n`,
      );
    const pools = await call(
      fake,
      'GET',
      '/apis/ipam.example.com/v1/ippools?fieldSelector=metadata.namespace%3Ddefault',
    );
    assert.deepEqual([pools.status, pools.json.kind], [200, 'IPPoolList']);
  });

  it('§6 pages with limit/continue over the first page snapshot, remainingItemCount only without selectors', async (t) => {
    const fake = await startedWith(t);
    await fiveBlocks(fake);
    const listRv = fake.resourceVersion();
    const first = await call(fake, 'GET', `${BLOCKS}?limit=2`);
    assert.deepEqual(names(first), ['b1', 'b2']);
    const token = first.json.metadata.continue;
    assert.deepEqual(first.json.metadata, { continue: token, remainingItemCount: 3, resourceVersion: listRv });
    assert.deepEqual(JSON.parse(Buffer.from(token, 'base64url').toString()), {
      v: 'meta.k8s.io/v1',
      rv: Number(listRv),
      start: 'b2\u0000',
    });
    assert.ok(!token.endsWith('='), 'unpadded');

    const b3 = (await call(fake, 'GET', `${BLOCKS}/b3`)).json;
    const changed = await call(fake, 'PUT', `${BLOCKS}/b3`, {
      body: { ...b3, spec: { ...b3.spec, affinity: 'host:CHANGED' } },
    });
    assert.equal(changed.status, 200);
    await call(fake, 'POST', BLOCKS, { body: block('b0') });
    await call(fake, 'DELETE', `${BLOCKS}/b4`);
    const second = await call(fake, 'GET', `${BLOCKS}?limit=2&continue=${token}`);
    assert.deepEqual(names(second), ['b3', 'b4'], 'the snapshot: b4 still there, b0 not yet');
    assert.deepEqual(
      [second.json.items[0].spec.affinity, second.json.items[0].metadata.resourceVersion],
      ['host:n1', b3.metadata.resourceVersion],
    );
    assert.deepEqual([second.json.metadata.resourceVersion, second.json.metadata.remainingItemCount], [listRv, 1]);
    const last = await call(fake, 'GET', `${BLOCKS}?limit=2&continue=${second.json.metadata.continue}`);
    assert.deepEqual([names(last), last.json.metadata], [['b5'], { continue: '', resourceVersion: listRv }]);

    const selected = await call(fake, 'GET', `${BLOCKS}?limit=2&labelSelector=node%3Dn2`);
    assert.deepEqual([names(selected), selected.json.metadata.remainingItemCount], [['b5'], undefined]);
    const n1 = await call(fake, 'GET', `${BLOCKS}?limit=2&labelSelector=node%3Dn1`);
    assert.deepEqual(names(n1), ['b1', 'b2']);
    assert.equal(n1.json.metadata.remainingItemCount, undefined);
    assert.notEqual(n1.json.metadata.continue, '');
    for (const limit of ['0', '-1']) assert.equal(names(await call(fake, 'GET', `${BLOCKS}?limit=${limit}`)).length, 5);

    assert.equal(
      (await call(fake, 'GET', `${BLOCKS}?continue=garbage`)).text,
      `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"invalid continue token: continue key is not valid: invalid character '\\\\u0081' looking for beginning of value","reason":"BadRequest","code":400}\n`,
    );
    assert.equal(
      (await call(fake, 'GET', `${BLOCKS}?continue=${token}&resourceVersion=5`)).json.message,
      'specifying resource version is not allowed when using continue',
    );
    fake.compactHistory();
    const expired = await call(fake, 'GET', `${BLOCKS}?limit=2&continue=${token}`);
    assert.equal(expired.status, 410);
    assert.equal(expired.json.reason, 'Expired');
    assert.deepEqual(JSON.parse(Buffer.from(expired.json.metadata.continue, 'base64url').toString()), {
      v: 'meta.k8s.io/v1',
      rv: -1,
      start: 'b2\u0000',
    });
    assert.match(
      expired.json.message,
      /^The provided continue parameter is too old to display a consistent list result\./,
    );
    const noRv = await call(fake, 'GET', `${BLOCKS}?resourceVersionMatch=Exact`);
    assert.equal(
      noRv.json.message,
      'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided',
    );
    const zero = await call(fake, 'GET', `${BLOCKS}?resourceVersion=0&resourceVersionMatch=Exact`);
    assert.equal(
      zero.json.message,
      'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
    );
    assert.equal(
      (await call(fake, 'GET', `${BLOCKS}?resourceVersion=0&limit=1`)).json.items.length,
      5,
      'RV 0: limit ignored',
    );
  });

  it('§7 a label-selector watch: DELETED (old object, new RV) when leaving, ADDED when entering, MODIFIED inside', async (t) => {
    const fake = await startedWith(t);
    await fiveBlocks(fake);
    const from = fake.resourceVersion();
    const stream = await openWatch(fake, `${BLOCKS}?watch=1&resourceVersion=${from}&labelSelector=node%3Dn1`);
    t.after(() => stream.close());
    assert.equal(stream.status, 200);
    const patch = (name: string, body: unknown) =>
      call(fake, 'PATCH', `${BLOCKS}/${name}`, { body, contentType: 'application/merge-patch+json' });
    const left = (await patch('b2', { metadata: { labels: { node: 'n3' } } })).json;
    await patch('b2', { spec: { affinity: 'host:n9' } });
    const entered = (await patch('b4', { metadata: { labels: { node: 'n1' } } })).json;
    const inside = (await patch('b1', { spec: { affinity: 'host:n7' } })).json;
    const gone = await call(fake, 'DELETE', `${BLOCKS}/b3`);
    assert.equal(gone.status, 200);
    await eventsAtLeast('five events', stream, 4);
    const seen = stream.events.map((e) => [
      e.type,
      e.object.metadata.name,
      e.object.metadata.resourceVersion,
      e.object.metadata.labels.node,
    ]);
    assert.deepEqual(seen.slice(0, 3), [
      ['DELETED', 'b2', left.metadata.resourceVersion, 'n1'],
      ['ADDED', 'b4', entered.metadata.resourceVersion, 'n1'],
      ['MODIFIED', 'b1', inside.metadata.resourceVersion, 'n1'],
    ]);
    await eventsAtLeast('the deletion', stream, 4);
    assert.deepEqual([stream.events[3].type, stream.events[3].object.metadata.name], ['DELETED', 'b3']);
    assert.equal(Number(stream.events[3].object.metadata.resourceVersion), Number(fake.resourceVersion()));
    assert.deepEqual(Object.keys(stream.events[0].object), ['apiVersion', 'kind', 'metadata', 'spec'], 'sorted keys');
  });

  it('§7 synthetic ADDEDs without an RV, the 410 as an ERROR event inside a 200, bookmarks when asked, and timeoutSeconds', async (t) => {
    const fake = await startedWith(t);
    await fiveBlocks(fake);
    for (const rv of ['', '&resourceVersion=0']) {
      const all = await openWatch(fake, `${BLOCKS}?watch=1${rv}`);
      await eventsAtLeast('the synthetic ADDEDs', all, 5);
      assert.deepEqual(
        all.events.map((e) => e.type),
        ['ADDED', 'ADDED', 'ADDED', 'ADDED', 'ADDED'],
      );
      all.close();
    }
    const old = await openWatch(fake, `${BLOCKS}?watch=1&resourceVersion=1`);
    await old.ended;
    assert.equal(old.status, 200);
    assert.equal(old.events.length, 1);
    assert.deepEqual(old.events[0].type, 'ERROR');
    assert.match(old.events[0].object.message, /^too old resource version: 1 \(\d+\)$/);
    assert.deepEqual([old.events[0].object.reason, old.events[0].object.code], ['Expired', 410]);
    assert.deepEqual(Object.keys(old.events[0].object), [
      'kind',
      'apiVersion',
      'metadata',
      'status',
      'message',
      'reason',
      'code',
    ]);

    const future = await openWatch(fake, `${BLOCKS}?watch=1&resourceVersion=${Number(fake.resourceVersion()) + 2}`);
    for (const name of ['f1', 'f2', 'f3']) await call(fake, 'POST', BLOCKS, { body: block(name) });
    await eventsAtLeast('the first change past the future RV', future, 1);
    assert.deepEqual(
      future.events.map((e) => [e.type, e.object.metadata.name]),
      [['ADDED', 'f3']],
      'silence until the store passes a future RV',
    );
    future.close();
    await future.ended;

    const bad = await call(fake, 'GET', `${BLOCKS}?watch=1&resourceVersion=abc`);
    assert.equal(
      bad.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"resourceVersion: Invalid value: \\"abc\\": strconv.ParseUint: parsing \\"abc\\": invalid syntax","code":500}\n',
    );

    const now = fake.resourceVersion();
    const marked = await openWatch(
      fake,
      `${BLOCKS}?watch=1&resourceVersion=${now}&allowWatchBookmarks=true&timeoutSeconds=2`,
    );
    const plain = await openWatch(fake, `${BLOCKS}?watch=1&resourceVersion=${now}`);
    t.after(() => plain.close());
    fake.bookmark();
    await eventsAtLeast('a bookmark', marked, 1);
    assert.deepEqual(marked.events[0], {
      type: 'BOOKMARK',
      object: { apiVersion: 'ipam.example.com/v1', kind: 'IPAMBlock', metadata: { resourceVersion: now } },
    });
    await marked.ended;
    assert.equal(marked.events.length, 2, 'one more bookmark 1.5 s before the timeout, then a clean end');
    assert.equal(marked.events[1].type, 'BOOKMARK');
    assert.equal(plain.events.length, 0, 'no bookmark unless asked');
    assert.equal(fake.watchCount('ipamblocks'), 1);
  });
});
