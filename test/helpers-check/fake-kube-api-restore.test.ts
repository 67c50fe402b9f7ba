/**
 * The fake Kubernetes API when its etcd is restored from an older snapshot under it (`snapshot`,
 * `restoreSnapshot`), on the wire: what a real apiserver restarted over a restored etcd answers.
 * Objects created since the snapshot are gone, deleted ones back, changed ones at their old state
 * and resourceVersion; the global resourceVersion goes back to the snapshot's (or past every old
 * one with --bump-revision); open watches end, and one resumed from an RV the restored store never
 * reached waits in silence (not bumped) or gets 410 Gone (bumped, or older than the restored RV),
 * so the client relists.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IPAMBLOCK_CRD, call, eventsAtLeast, openWatch, startedWith } from './kube-wire.ts';

const BLOCKS = '/apis/ipam.example.com/v1/ipamblocks';
const block = (name: string, node: string) => ({
  apiVersion: 'ipam.example.com/v1',
  kind: 'IPAMBlock',
  metadata: { name },
  spec: { cidr: '10.0.1.0/26', affinity: `host:${node}` },
});

describe('the fake Kubernetes API restored from an older etcd snapshot', () => {
  it('forgets what was written since: objects created since gone, deleted ones back, the resourceVersion back', async (t) => {
    const fake = await startedWith(t, { crds: [IPAMBLOCK_CRD] });
    assert.equal((await call(fake, 'POST', BLOCKS, { body: block('b1', 'n1') })).status, 201);
    assert.equal((await call(fake, 'POST', BLOCKS, { body: block('b2', 'n1') })).status, 201);
    const before = (await call(fake, 'GET', BLOCKS)).json;
    const snapshot = fake.snapshot();

    assert.equal((await call(fake, 'POST', BLOCKS, { body: block('b3', 'n2') })).status, 201);
    assert.equal((await call(fake, 'DELETE', `${BLOCKS}/b1`)).status, 200);
    const later = Number((await call(fake, 'GET', BLOCKS)).json.metadata.resourceVersion);

    fake.restoreSnapshot(snapshot);
    const after = (await call(fake, 'GET', BLOCKS)).json;
    assert.deepEqual(
      after.items.map((o: { metadata: { name: string; resourceVersion: string; uid: string } }) => o.metadata),
      before.items.map((o: { metadata: unknown }) => o.metadata),
      'b1 and b2 as they were, uid and resourceVersion; b3 gone',
    );
    assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion);
    assert.ok(Number(after.metadata.resourceVersion) < later, 'the resourceVersion went back');
    assert.equal((await call(fake, 'GET', `${BLOCKS}/b3`)).status, 404);
    // The next write takes the next revision of the restored etcd: lower than ones already handed out.
    const made = await call(fake, 'POST', BLOCKS, { body: block('b4', 'n3') });
    assert.equal(made.status, 201);
    assert.ok(Number(made.json.metadata.resourceVersion) <= later);
  });

  it('ends open watches; one resumed from a lost RV waits in silence, one from an older RV gets 410 Gone', async (t) => {
    const fake = await startedWith(t, { crds: [IPAMBLOCK_CRD] });
    await call(fake, 'POST', BLOCKS, { body: block('b1', 'n1') });
    const snapshotRv = fake.resourceVersion();
    const snapshot = fake.snapshot();
    await call(fake, 'POST', BLOCKS, { body: block('b2', 'n1') });
    const lost = fake.resourceVersion();
    const open = await openWatch(fake, `${BLOCKS}?watch=true&resourceVersion=${lost}`);
    assert.equal(open.status, 200);

    fake.restoreSnapshot(snapshot);
    await open.ended; // the apiserver restarted
    assert.equal(fake.watchCount(), 0);

    // From the lost future: the restored store has not reached it, so the watch waits (no event)...
    const future = await openWatch(fake, `${BLOCKS}?watch=true&resourceVersion=${lost}`);
    assert.equal(future.status, 200);
    await call(fake, 'POST', BLOCKS, { body: block('b9', 'n9') }); // at lost's RV: not after it
    assert.deepEqual(future.events, [], 'a change at or before the resumed RV is not sent');
    future.close();
    // ...and from before the restored RV: no history there, 410 Gone, relist.
    const older = await openWatch(fake, `${BLOCKS}?watch=true&resourceVersion=${Number(snapshotRv) - 1}`);
    await eventsAtLeast('the 410', older, 1);
    assert.equal(older.events[0].type, 'ERROR');
    assert.equal(older.events[0].object.code, 410);
    assert.equal(older.events[0].object.reason, 'Expired');
  });

  it('restored with a bumped revision: every old resourceVersion is below it, a resumed watch gets 410 Gone', async (t) => {
    const fake = await startedWith(t, { crds: [IPAMBLOCK_CRD] });
    const snapshot = fake.snapshot();
    await call(fake, 'POST', BLOCKS, { body: block('b1', 'n1') });
    const lost = fake.resourceVersion();
    fake.restoreSnapshot(snapshot, { bumpRevision: 1000 });
    assert.ok(Number(fake.resourceVersion()) > Number(lost), 'the revision moved past every old one');
    assert.equal((await call(fake, 'GET', `${BLOCKS}/b1`)).status, 404, 'b1 is gone all the same');
    const resumed = await openWatch(fake, `${BLOCKS}?watch=true&resourceVersion=${lost}`);
    await eventsAtLeast('the 410', resumed, 1);
    assert.equal(resumed.events[0].object.code, 410);
    // A relist and a watch from its RV work as ever.
    const list = (await call(fake, 'GET', BLOCKS)).json;
    const relisted = await openWatch(fake, `${BLOCKS}?watch=true&resourceVersion=${list.metadata.resourceVersion}`);
    await call(fake, 'POST', BLOCKS, { body: block('b2', 'n2') });
    await eventsAtLeast('the ADDED after the relist', relisted, 1);
    assert.equal(relisted.events[0].type, 'ADDED');
    relisted.close();
  });
});
