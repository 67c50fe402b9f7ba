/**
 * The fake Kubernetes API's custom resource updates against the answers recorded from a real
 * kube-apiserver (the project's notes on the Kubernetes API, sections 3–5: update, patch,
 * delete), over real HTTPS. Bodies are compared exactly where the record gives them, after
 * replacing what a server makes up (uids, times, RVs) with the fake's own values.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IPAMBLOCK_CRD, POOLS, block, call, keysSorted, startedWith, trimmed } from './kube-wire.ts';

describe('fake Kubernetes API: custom resource updates, patches and deletes, as recorded', () => {
  it('§3 PUT needs the current resourceVersion, ignores status, bumps generation on spec only, and stores nothing for a no-op', async (t) => {
    const fake = await startedWith(t);
    const pool = {
      apiVersion: 'ipam.example.com/v1',
      kind: 'IPPool',
      metadata: { name: 'pool-a', labels: { node: 'n1' } },
      spec: { cidr: '10.0.0.0/24', size: 256 },
    };
    const created = (await call(fake, 'POST', POOLS, { body: pool })).json;
    const rv0 = created.metadata.resourceVersion;
    const put = (body: unknown, path = `${POOLS}/pool-a`) => call(fake, 'PUT', path, { body });
    const first = await put({ ...created, spec: { cidr: '10.0.0.0/24', size: 128 }, status: { used: 7 } });
    assert.equal(first.status, 200);
    assert.deepEqual(trimmed(first.json), {
      apiVersion: 'ipam.example.com/v1',
      kind: 'IPPool',
      metadata: {
        creationTimestamp: created.metadata.creationTimestamp,
        generation: 2,
        labels: { node: 'n1' },
        name: 'pool-a',
        namespace: 'default',
        resourceVersion: first.json.metadata.resourceVersion,
        uid: created.metadata.uid,
      },
      spec: { cidr: '10.0.0.0/24', size: 128 },
    });
    assert.ok(Number(first.json.metadata.resourceVersion) > Number(rv0));
    assert.ok(keysSorted(first.json), 'keys sorted at every level');
    const stale = await put({ ...created, spec: { cidr: '10.0.0.0/24', size: 128 } });
    assert.equal(
      stale.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on ippools.ipam.example.com \\"pool-a\\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"name":"pool-a","group":"ipam.example.com","kind":"ippools"},"code":409}\n',
    );
    const { resourceVersion: _rv, ...noRvMeta } = first.json.metadata;
    const noRv = await put({ ...first.json, metadata: noRvMeta });
    assert.equal(
      noRv.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ippools.ipam.example.com \\"pool-a\\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update","reason":"Invalid","details":{"name":"pool-a","group":"ipam.example.com","kind":"ippools","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: 0x0: must be specified for an update","field":"metadata.resourceVersion"}]},"code":422}\n',
    );
    const status = await put(
      {
        ...first.json,
        metadata: { ...first.json.metadata, labels: { node: 'zz' } },
        spec: { cidr: '1.0.0.0/8' },
        status: { used: 9, note: 'hi' },
      },
      `${POOLS}/pool-a/status`,
    );
    assert.deepEqual(
      [
        status.status,
        status.json.metadata.generation,
        status.json.metadata.labels,
        status.json.spec,
        status.json.status,
      ],
      [200, 2, { node: 'n1' }, { cidr: '10.0.0.0/24', size: 128 }, { note: 'hi', used: 9 }],
    );
    assert.deepEqual(status.json.metadata.managedFields.at(-1).subresource, 'status');
    const same = await put(status.json);
    assert.equal(
      same.json.metadata.resourceVersion,
      status.json.metadata.resourceVersion,
      'a no-op PUT is not a write',
    );
    const onlyStatus = await put({ ...status.json, status: { used: 1 } });
    assert.deepEqual(
      [onlyStatus.json.metadata.resourceVersion, onlyStatus.json.status],
      [status.json.metadata.resourceVersion, { note: 'hi', used: 9 }],
    );
    assert.equal(
      (await put({ ...status.json, metadata: { ...status.json.metadata, name: 'pool-b' } })).json.message,
      'the name of the object (pool-b) does not match the name on the URL (pool-a)',
    );
    const missing = await put(
      { ...status.json, metadata: { ...status.json.metadata, name: 'pool-new' } },
      `${POOLS}/pool-new`,
    );
    assert.equal(
      missing.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ippools.ipam.example.com \\"pool-new\\" not found","reason":"NotFound","details":{"name":"pool-new","group":"ipam.example.com","kind":"ippools"},"code":404}\n',
    );
    const abc = await put({ ...status.json, metadata: { ...status.json.metadata, resourceVersion: 'abc' } });
    assert.equal(
      abc.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"strconv.ParseUint: parsing \\"abc\\": invalid syntax","code":500}\n',
    );
    const uid = await put({
      ...status.json,
      metadata: { ...status.json.metadata, uid: '11111111-1111-1111-1111-111111111111' },
    });
    assert.equal(
      uid.json.message,
      `Operation cannot be fulfilled on ippools.ipam.example.com "pool-a": StorageError: invalid object, Code: 4, Key: /registry/ipam.example.com/ippools/default/pool-a, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 11111111-1111-1111-1111-111111111111, UID in object meta: ${created.metadata.uid}`,
    );
  });

  it('§3 without a status subresource, status is part of the object: stored on create and PUT, and counted by generation', async (t) => {
    const fake = await startedWith(t);
    const crd = structuredClone(IPAMBLOCK_CRD);
    const spec = crd.spec as { names: Record<string, string>; versions: Array<Record<string, unknown>> };
    crd.metadata.name = 'plainblocks.ipam.example.com';
    spec.names = { plural: 'plainblocks', singular: 'plainblock', kind: 'PlainBlock', listKind: 'PlainBlockList' };
    delete spec.versions[0]?.subresources;
    fake.registerCrd(crd);
    const path = '/apis/ipam.example.com/v1/plainblocks';
    const body = { ...block('p1'), kind: 'PlainBlock', status: { used: 1 } };
    const created = await call(fake, 'POST', path, { body });
    assert.deepEqual([created.status, created.json.status], [201, { used: 1 }]);
    const put = await call(fake, 'PUT', `${path}/p1`, { body: { ...created.json, status: { used: 2 } } });
    assert.deepEqual([put.json.status, put.json.metadata.generation], [{ used: 2 }, 2]);
    assert.equal((await call(fake, 'GET', `${path}/p1/status`)).text, '404 page not found\n');
  });

  it('§4 merge and JSON patches: RV preconditions, generation, null removes a key, the generic 422, 415 for other types', async (t) => {
    const fake = await startedWith(t);
    const pool = {
      apiVersion: 'ipam.example.com/v1',
      kind: 'IPPool',
      metadata: { name: 'pool-a' },
      spec: { cidr: '10.0.0.0/24', size: 256 },
    };
    const created = (await call(fake, 'POST', POOLS, { body: pool })).json;
    const path = `${POOLS}/pool-a`;
    const merge = (body: unknown, p = path) =>
      call(fake, 'PATCH', p, { body, contentType: 'application/merge-patch+json' });
    const json = (body: unknown) => call(fake, 'PATCH', path, { body, contentType: 'application/json-patch+json' });
    const labelled = await merge({ metadata: { labels: { extra: '1' } } });
    assert.deepEqual(
      [labelled.status, labelled.json.metadata.generation, labelled.json.metadata.labels],
      [200, 1, { extra: '1' }],
    );
    const stale = await merge({ metadata: { resourceVersion: created.metadata.resourceVersion }, spec: { size: 100 } });
    assert.deepEqual([stale.status, stale.json.reason, stale.json.details.kind], [409, 'Conflict', 'ippools']);
    const current = await merge({
      metadata: { resourceVersion: labelled.json.metadata.resourceVersion },
      spec: { size: 100, allocations: { '10.0.0.2': 'pod-y' } },
    });
    assert.deepEqual([current.status, current.json.metadata.generation], [200, 2]);
    const removed = await merge({ spec: { allocations: { '10.0.0.2': null } } });
    assert.deepEqual([removed.json.spec.allocations, removed.json.metadata.generation], [{}, 3]);
    const generic =
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server rejected our request due to an error in our request","reason":"Invalid","details":{},"code":422}\n';
    assert.equal(
      (
        await json([
          { op: 'test', path: '/spec/size', value: 5 },
          { op: 'replace', path: '/spec/size', value: 6 },
        ])
      ).text,
      generic,
    );
    assert.equal((await json([{ op: 'remove', path: '/spec/nothere' }])).text, generic);
    const tested = await json([
      { op: 'test', path: '/spec/size', value: 100 },
      { op: 'replace', path: '/spec/size', value: 6 },
    ]);
    assert.deepEqual([tested.status, tested.json.spec.size], [200, 6]);
    const rvReplace = await json([
      { op: 'replace', path: '/metadata/resourceVersion', value: created.metadata.resourceVersion },
    ]);
    assert.equal(rvReplace.status, 409);
    assert.equal(
      (await json({ op: 'test' })).text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"json: cannot unmarshal object into Go value of type jsonpatch.Patch","reason":"BadRequest","code":400}\n',
    );
    const unsupported =
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml","reason":"UnsupportedMediaType","code":415}\n';
    for (const contentType of ['application/strategic-merge-patch+json', 'application/json'])
      assert.equal(
        (await call(fake, 'PATCH', path, { body: { spec: {} }, contentType })).text,
        unsupported,
        contentType,
      );
    const apply = await call(fake, 'PATCH', `${path}?fieldManager=a`, {
      body: 'spec: {}',
      contentType: 'application/apply-patch+yaml',
    });
    assert.deepEqual(
      [apply.status, apply.json.message],
      [415, 'the fake Kubernetes API does not serve server-side apply (application/apply-patch+yaml)'],
    );
    const invalid = await merge({ spec: { size: 99999 } });
    assert.deepEqual([invalid.status, invalid.json.details.kind], [422, 'IPPool']);
    assert.equal((await merge({ spec: {} }, `${POOLS}/nope`)).status, 404);
    const status = await merge({ spec: { size: 3 }, status: { used: 42 } }, `${path}/status`);
    assert.deepEqual(
      [status.json.spec.size, status.json.status, status.json.metadata.generation],
      [6, { used: 42 }, 4],
    );
  });

  it('§5 delete: Success Status with uid, Kind-cased precondition conflicts, finalizers, propagation policies', async (t) => {
    const fake = await startedWith(t);
    const make = async (name: string, finalizers?: string[]) =>
      (
        await call(fake, 'POST', POOLS, {
          body: {
            apiVersion: 'ipam.example.com/v1',
            kind: 'IPPool',
            metadata: { name, ...(finalizers ? { finalizers } : {}) },
            spec: { cidr: '10.0.0.0/24' },
          },
        })
      ).json;
    const d1 = await make('d1');
    assert.equal(
      (await call(fake, 'DELETE', `${POOLS}/d1`)).text,
      `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":{"name":"d1","group":"ipam.example.com","kind":"ippools","uid":"${d1.metadata.uid}"}}\n`,
    );
    assert.equal(
      (await call(fake, 'DELETE', `${POOLS}/d1`)).text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ippools.ipam.example.com \\"d1\\" not found","reason":"NotFound","details":{"name":"d1","group":"ipam.example.com","kind":"ippools"},"code":404}\n',
    );
    const d2 = await make('d2');
    const options = (preconditions: unknown) => ({ body: { kind: 'DeleteOptions', apiVersion: 'v1', preconditions } });
    const wrongUid = await call(
      fake,
      'DELETE',
      `${POOLS}/d2`,
      options({ uid: '00000000-0000-0000-0000-000000000000' }),
    );
    assert.equal(
      wrongUid.text,
      `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on IPPool.ipam.example.com \\"d2\\": the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match the UID in record (${d2.metadata.uid}). The object might have been deleted and then recreated","reason":"Conflict","details":{"name":"d2","group":"ipam.example.com","kind":"IPPool"},"code":409}\n`,
    );
    const staleRv = await call(fake, 'DELETE', `${POOLS}/d2`, options({ resourceVersion: '1' }));
    assert.equal(
      staleRv.json.message,
      `Operation cannot be fulfilled on IPPool.ipam.example.com "d2": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (${d2.metadata.resourceVersion}). The object might have been modified`,
    );
    const both = await call(
      fake,
      'DELETE',
      `${POOLS}/d2`,
      options({ uid: d2.metadata.uid, resourceVersion: d2.metadata.resourceVersion }),
    );
    assert.deepEqual([both.status, both.json.status], [200, 'Success']);

    const f1 = await make('f1', ['ipam.example.com/hold']);
    const marked = await call(fake, 'DELETE', `${POOLS}/f1`);
    assert.deepEqual(
      [
        marked.status,
        marked.json.kind,
        marked.json.metadata.deletionGracePeriodSeconds,
        marked.json.metadata.generation,
        marked.json.metadata.finalizers,
      ],
      [200, 'IPPool', 0, 2, ['ipam.example.com/hold']],
    );
    assert.match(marked.json.metadata.deletionTimestamp, /Z$/);
    const second = await call(fake, 'DELETE', `${POOLS}/f1`);
    assert.equal(second.json.metadata.resourceVersion, marked.json.metadata.resourceVersion, 'no write');
    const adding = await call(fake, 'PATCH', `${POOLS}/f1`, {
      body: { metadata: { finalizers: ['ipam.example.com/hold', 'x.io/new'] } },
      contentType: 'application/merge-patch+json',
    });
    const forbiddenText =
      'Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\\"x.io/new\\"}';
    assert.equal(
      adding.text,
      `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"IPPool.ipam.example.com \\"f1\\" is invalid: metadata.finalizers: ${forbiddenText}","reason":"Invalid","details":{"name":"f1","group":"ipam.example.com","kind":"IPPool","causes":[{"reason":"FieldValueForbidden","message":"${forbiddenText}","field":"metadata.finalizers"},{"reason":"FieldValueForbidden","message":"${forbiddenText}","field":"metadata.finalizers"}]},"code":422}\n`,
    );
    f1.metadata.uid = marked.json.metadata.uid;
    const released = await call(fake, 'PATCH', `${POOLS}/f1`, {
      body: { metadata: { finalizers: null } },
      contentType: 'application/merge-patch+json',
    });
    assert.deepEqual(
      [released.status, released.json.metadata.finalizers, released.json.metadata.resourceVersion],
      [200, undefined, marked.json.metadata.resourceVersion],
    );
    assert.ok(keysSorted(released.json));
    assert.equal((await call(fake, 'GET', `${POOLS}/f1`)).status, 404, 'gone with its last finalizer');

    await make('fg');
    const fg = await call(fake, 'DELETE', `${POOLS}/fg`, {
      body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Foreground' },
    });
    assert.deepEqual([fg.json.metadata.finalizers, fg.json.metadata.generation], [['foregroundDeletion'], 2]);
    await make('bg');
    const bogus = await call(fake, 'DELETE', `${POOLS}/bg`, {
      body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Bogus' },
    });
    assert.equal(
      bogus.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"DeleteOptions.meta.k8s.io \\"\\" is invalid: propagationPolicy: Unsupported value: \\"Bogus\\": supported values: \\"Foreground\\", \\"Background\\", \\"Orphan\\", \\"nil\\"","reason":"Invalid","details":{"group":"meta.k8s.io","kind":"DeleteOptions","causes":[{"reason":"FieldValueNotSupported","message":"Unsupported value: \\"Bogus\\": supported values: \\"Foreground\\", \\"Background\\", \\"Orphan\\", \\"nil\\"","field":"propagationPolicy"}]},"code":422}\n',
    );
    const bg = await call(fake, 'DELETE', `${POOLS}/bg`, {
      body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Background' },
    });
    assert.equal(bg.json.status, 'Success');
    const none = await call(fake, 'DELETE', `${POOLS}?labelSelector=nomatch%3D1`);
    assert.deepEqual(none.json, {
      apiVersion: 'ipam.example.com/v1',
      items: [],
      kind: 'IPPoolList',
      metadata: { continue: '', resourceVersion: none.json.metadata.resourceVersion },
    });
    for (const name of ['dc1', 'dc2'])
      await call(fake, 'POST', POOLS, {
        body: {
          apiVersion: 'ipam.example.com/v1',
          kind: 'IPPool',
          metadata: { name, labels: { dc: 'yes' } },
          spec: { cidr: '10.0.0.0/24' },
        },
      });
    const before = fake.resourceVersion();
    const swept = await call(fake, 'DELETE', `${POOLS}?labelSelector=dc%3Dyes`);
    assert.deepEqual(
      [
        swept.json.kind,
        swept.json.metadata.resourceVersion,
        swept.json.items.map((i: { metadata: { name: string; deletionTimestamp?: string } }) => [
          i.metadata.name,
          i.metadata.deletionTimestamp,
        ]),
      ],
      [
        'IPPoolList',
        before,
        [
          ['dc1', undefined],
          ['dc2', undefined],
        ],
      ],
      'the objects as they were before deletion, at the pre-delete RV',
    );
    assert.equal((await call(fake, 'GET', `${POOLS}/dc1`)).status, 404);
  });
});
