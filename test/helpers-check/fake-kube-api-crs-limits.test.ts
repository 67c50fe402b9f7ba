/**
 * The fake Kubernetes API against the answers recorded from a real kube-apiserver for size limits,
 * RBAC and Leases (the project's notes on the Kubernetes API, sections 8, 10 and 12), over real
 * HTTPS; and the fake's own hooks for benches and tests: request counts, a per-write latency that
 * holds up no other request, bulk preloads read back by plural, unavailability on CR paths.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BLOCKS, block, call, keysSorted, startedWith } from './kube-wire.ts';

const LEASES = '/apis/coordination.k8s.io/v1/namespaces/default/leases';

function lease(name: string, spec: Record<string, unknown>) {
  return { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name }, spec };
}

describe('fake Kubernetes API: size limits, RBAC, Leases, and the hooks benches use', () => {
  it('§8 accepts objects up to etcd’s 1.5 MiB, answers the etcd and gRPC 500s above, and 413 past 3 MiB of body', async (t) => {
    const fake = await startedWith(t);
    const sized = (name: string, bytes: number) => {
      const base = JSON.stringify(block(name, {}, { blob: '' }));
      return JSON.stringify(block(name, {}, { blob: 'x'.repeat(bytes - base.length) }));
    };
    assert.equal((await call(fake, 'POST', BLOCKS, { body: sized('s1', 1_550_000) })).status, 201);
    const big = await call(fake, 'POST', BLOCKS, { body: sized('s2', 1_600_000) });
    assert.equal(
      big.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcdserver: request is too large","code":500}\n',
    );
    const huge = await call(fake, 'POST', BLOCKS, { body: sized('s3', 3_000_000) });
    assert.equal(huge.status, 500);
    assert.match(
      huge.json.message,
      /^rpc error: code = ResourceExhausted desc = trying to send message larger than max \(30\d{5} vs\. 2097152\)$/,
    );
    assert.equal(huge.json.reason, undefined);
    const over = await call(fake, 'POST', BLOCKS, { body: sized('s4', 3_500_000) });
    assert.equal(
      over.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Request entity too large: limit is 3145728","reason":"RequestEntityTooLarge","code":413}\n',
    );
    assert.equal(over.headers.connection, 'close');
    assert.deepEqual(
      fake.objects('ipamblocks').map((o) => o.metadata.name),
      ['s1'],
    );
  });

  it('§10 refuses a forbidden verb on a CR or its status before looking for the object, with the RBAC message', async (t) => {
    const fake = await startedWith(t, { user: 'node-agent' });
    await call(fake, 'POST', BLOCKS, { body: block('agent-made') });
    fake.forbid('update', 'ipamblocks');
    fake.forbid('get', 'ipamblocks/status');
    fake.forbid('deletecollection', 'ipamblocks');
    fake.forbid('list', 'ippools');
    fake.forbid('get', 'leases');
    const made = (await call(fake, 'GET', `${BLOCKS}/agent-made`)).json;
    assert.equal(
      (await call(fake, 'PUT', `${BLOCKS}/agent-made`, { body: made })).text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ipamblocks.ipam.example.com \\"agent-made\\" is forbidden: User \\"node-agent\\" cannot update resource \\"ipamblocks\\" in API group \\"ipam.example.com\\" at the cluster scope","reason":"Forbidden","details":{"name":"agent-made","group":"ipam.example.com","kind":"ipamblocks"},"code":403}\n',
    );
    assert.equal(
      (await call(fake, 'PUT', `${BLOCKS}/missing`, { body: made })).status,
      403,
      'authorization before existence',
    );
    assert.equal(
      (await call(fake, 'GET', `${BLOCKS}/agent-made/status`)).text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ipamblocks.ipam.example.com \\"agent-made\\" is forbidden: User \\"node-agent\\" cannot get resource \\"ipamblocks/status\\" in API group \\"ipam.example.com\\" at the cluster scope","reason":"Forbidden","details":{"name":"agent-made","group":"ipam.example.com","kind":"ipamblocks"},"code":403}\n',
    );
    assert.equal(
      (await call(fake, 'DELETE', BLOCKS)).text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ipamblocks.ipam.example.com is forbidden: User \\"node-agent\\" cannot deletecollection resource \\"ipamblocks\\" in API group \\"ipam.example.com\\" at the cluster scope","reason":"Forbidden","details":{"group":"ipam.example.com","kind":"ipamblocks"},"code":403}\n',
    );
    assert.equal(
      (await call(fake, 'GET', '/apis/ipam.example.com/v1/namespaces/default/ippools')).text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ippools.ipam.example.com is forbidden: User \\"node-agent\\" cannot list resource \\"ippools\\" in API group \\"ipam.example.com\\" in the namespace \\"default\\"","reason":"Forbidden","details":{"group":"ipam.example.com","kind":"ippools"},"code":403}\n',
    );
    assert.equal(
      (await call(fake, 'GET', `${LEASES}/x`)).json.message,
      'leases.coordination.k8s.io "x" is forbidden: User "node-agent" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "default"',
    );
    const patched = await call(fake, 'PATCH', `${BLOCKS}/agent-made/status`, {
      body: { status: { used: 1 } },
      contentType: 'application/merge-patch+json',
    });
    assert.equal(patched.status, 200, 'the status subresource has its own permissions');
    assert.equal(
      (await call(fake, 'GET', BLOCKS, { token: 'wrong' })).text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}\n',
    );
    fake.allow('update', 'ipamblocks');
    assert.equal(
      (
        await call(fake, 'PUT', `${BLOCKS}/agent-made`, {
          body: (await call(fake, 'GET', `${BLOCKS}/agent-made`)).json,
        })
      ).status,
      200,
    );
  });

  it('§12 Leases: struct order without generation, RV-guarded renewals and takeovers, MicroTime and value checks', async (t) => {
    const fake = await startedWith(t);
    const spec = {
      holderIdentity: 'node-a',
      leaseDurationSeconds: 15,
      acquireTime: '2026-11-24T22:30:40.242220Z',
      renewTime: '2026-11-24T22:30:40.242220Z',
      leaseTransitions: 0,
    };
    const created = await call(fake, 'POST', LEASES, { body: lease('ipam-leader', { ...spec, bogus: 1 }) });
    assert.equal(created.status, 201);
    const m = created.json.metadata;
    assert.deepEqual(Object.keys(created.json), ['kind', 'apiVersion', 'metadata', 'spec']);
    assert.deepEqual(Object.keys(m), [
      'name',
      'namespace',
      'uid',
      'resourceVersion',
      'creationTimestamp',
      'managedFields',
    ]);
    assert.deepEqual(created.json.spec, spec, 'unknown field dropped, struct order');
    const renewed = await call(fake, 'PUT', `${LEASES}/ipam-leader`, {
      body: { ...created.json, spec: { ...spec, renewTime: '2026-11-24T22:30:45.000001Z' } },
    });
    assert.deepEqual(
      [
        renewed.status,
        Number(renewed.json.metadata.resourceVersion) > Number(m.resourceVersion),
        renewed.json.metadata.generation,
      ],
      [200, true, undefined],
    );
    const takeover = await call(fake, 'PUT', `${LEASES}/ipam-leader`, {
      body: { ...created.json, spec: { ...spec, holderIdentity: 'node-b' } },
    });
    assert.equal(
      takeover.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on leases.coordination.k8s.io \\"ipam-leader\\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"name":"ipam-leader","group":"coordination.k8s.io","kind":"leases"},"code":409}\n',
    );
    const noRv = await call(fake, 'PUT', `${LEASES}/ipam-leader`, { body: lease('ipam-leader', spec) });
    assert.equal(
      noRv.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"leases.coordination.k8s.io \\"ipam-leader\\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update","reason":"Invalid","details":{"name":"ipam-leader","group":"coordination.k8s.io","kind":"leases","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: 0x0: must be specified for an update","field":"metadata.resourceVersion"}]},"code":422}\n',
    );
    assert.equal(
      (await call(fake, 'POST', LEASES, { body: lease('ipam-leader', spec) })).text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"leases.coordination.k8s.io \\"ipam-leader\\" already exists","reason":"AlreadyExists","details":{"name":"ipam-leader","group":"coordination.k8s.io","kind":"leases"},"code":409}\n',
    );
    const bad = await call(fake, 'POST', LEASES, {
      body: lease('bad-lease', { ...spec, leaseDurationSeconds: 0, leaseTransitions: -1 }),
    });
    assert.equal(
      bad.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Lease.coordination.k8s.io \\"bad-lease\\" is invalid: [spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0, spec.leaseTransitions: Invalid value: -1: must to greater or equal than 0]","reason":"Invalid","details":{"name":"bad-lease","group":"coordination.k8s.io","kind":"Lease","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: 0: must be greater than 0","field":"spec.leaseDurationSeconds"},{"reason":"FieldValueInvalid","message":"Invalid value: -1: must to greater or equal than 0","field":"spec.leaseTransitions"}]},"code":422}\n',
    );
    const seconds = await call(fake, 'POST', LEASES, {
      body: lease('t1', { ...spec, renewTime: '2026-11-24T22:30:00Z' }),
    });
    assert.equal(
      seconds.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Lease in version \\"v1\\" cannot be handled as a Lease: parsing time \\"2026-11-24T22:30:00Z\\" as \\"2006-01-02T15:04:05.000000Z07:00\\": cannot parse \\"Z\\" as \\".000000\\"","reason":"BadRequest","code":400}\n',
    );
    const word = await call(fake, 'POST', LEASES, { body: lease('t2', { ...spec, acquireTime: 'yesterday' }) });
    assert.equal(
      word.json.message,
      'Lease in version "v1" cannot be handled as a Lease: parsing time "yesterday" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "yesterday" as "2006"',
    );
    const millis = await call(fake, 'POST', LEASES, {
      body: lease('t3', { ...spec, renewTime: '2026-11-24T22:30:00.123Z' }),
    });
    assert.equal(millis.status, 400);
    const listed = await call(fake, 'GET', `${LEASES}?labelSelector=`);
    assert.deepEqual(
      [listed.json.kind, listed.json.items.length, Object.keys(listed.json.items[0])],
      ['LeaseList', 1, ['metadata', 'spec']],
    );
  });

  it('counts requests per verb and resource, delays writes without holding up reads, and preloads objects in bulk', async (t) => {
    const fake = await startedWith(t);
    fake.preload(
      'ipamblocks',
      (function* () {
        for (let i = 0; i < 10_000; i++) yield block(`p${String(i).padStart(5, '0')}`, { node: `n${i % 10}` });
      })(),
    );
    assert.equal(fake.objects('ipamblocks').length, 10_000);
    const one = fake.object('ipamblocks', 'p00042');
    assert.deepEqual(
      [one?.metadata.generation, one?.metadata.labels, typeof one?.metadata.uid],
      [1, { node: 'n2' }, 'string'],
    );
    const page = await call(fake, 'GET', `${BLOCKS}?limit=500&labelSelector=node%3Dn3`);
    assert.deepEqual([page.json.items.length, page.json.items[0].metadata.name], [500, 'p00003']);
    assert.ok(keysSorted(page.json), 'preloaded objects travel with sorted keys too');
    const counted = await call(fake, 'GET', `${BLOCKS}?limit=2`);
    assert.equal(counted.json.metadata.remainingItemCount, 9_998);
    fake.clearRequests();
    // A long latency, so that the read's answer comes first even on a loaded machine.
    fake.setWriteLatency(3000);
    const started = Date.now();
    let written = false;
    const write = call(fake, 'POST', BLOCKS, { body: block('slow') }).then((answer) => {
      written = true;
      return answer;
    });
    const read = await call(fake, 'GET', `${BLOCKS}/p00001`);
    assert.deepEqual([read.status, written], [200, false], 'the read did not queue behind the write');
    assert.equal((await write).status, 201);
    assert.ok(Date.now() - started >= 3000, 'the write waited its latency');
    assert.equal(fake.object('ipamblocks', 'slow')?.metadata.name, 'slow');
    fake.setWriteLatency(0);
    await call(fake, 'PATCH', `${BLOCKS}/slow/status`, {
      body: { status: { used: 1 } },
      contentType: 'application/merge-patch+json',
    });
    await call(fake, 'GET', '/apis/ipam.example.com/v1/nosuch');
    assert.deepEqual(fake.requestCounts(), {
      'create ipamblocks': 1,
      'get ipamblocks': 1,
      other: 1,
      'patch ipamblocks/status': 1,
    });
    assert.equal(fake.deleteObject('ipamblocks', 'p00001'), true);
    assert.equal((await call(fake, 'GET', `${BLOCKS}/p00001`)).status, 404);
    assert.equal(fake.deleteObject('ipamblocks', 'p00001'), false);
    await fake.setUnavailable(true, '503');
    assert.equal((await call(fake, 'GET', BLOCKS)).status, 503);
    await fake.setUnavailable(false);
    assert.equal((await call(fake, 'GET', `${BLOCKS}/slow`)).status, 200);
  });
});
