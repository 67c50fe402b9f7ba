/**
 * The fake Kubernetes API's custom resources against the answers recorded from a real
 * kube-apiserver (the project's notes on the Kubernetes API, sections 1–2: CRD registration and
 * create; sections 3–5 are in fake-kube-api-crs-updates.test.ts), over real HTTPS. Bodies are
 * compared exactly where the record gives them, after replacing what a server makes up (uids, times, RVs) with the fake's own values.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { waitFor } from '../helpers/processes.ts';
import { BLOCKS, IPPOOL_CRD, POOLS, block, call, keysSorted, startedWith } from './kube-wire.ts';

const CRDS_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

describe('fake Kubernetes API: CRDs and custom resource writes, as recorded', () => {
  it('§1 a CRD created over the API comes back with conditions null, and its resource is a text 404 until NamesAccepted', async (t) => {
    const fake = await startFakeKubeApi({ crdEstablishMs: Number.POSITIVE_INFINITY });
    t.after(() => fake.stop());
    const before = await call(fake, 'GET', '/apis/ipam.example.com/v1/namespaces/default/ippools');
    assert.deepEqual(
      [before.status, before.headers['content-type'], before.text],
      [404, 'text/plain; charset=utf-8', '404 page not found\n'],
    );

    const created = await call(fake, 'POST', CRDS_PATH, { body: IPPOOL_CRD, userAgent: 'curl/8.0' });
    assert.equal(created.status, 201);
    assert.deepEqual(Object.keys(created.json), ['kind', 'apiVersion', 'metadata', 'spec', 'status']);
    assert.deepEqual(Object.keys(created.json.metadata), [
      'name',
      'uid',
      'resourceVersion',
      'generation',
      'creationTimestamp',
      'managedFields',
    ]);
    assert.equal(created.json.metadata.managedFields[0].manager, 'curl');
    assert.deepEqual(created.json.status, {
      conditions: null,
      acceptedNames: { plural: '', kind: '' },
      storedVersions: ['v1'],
    });
    assert.deepEqual(created.json.spec.conversion, { strategy: 'None' });
    assert.deepEqual(created.json.spec.names, {
      plural: 'ippools',
      singular: 'ippool',
      shortNames: ['ipp'],
      kind: 'IPPool',
      listKind: 'IPPoolList',
    });
    const spec = created.json.spec.versions[0].schema.openAPIV3Schema.properties.spec;
    assert.deepEqual(Object.keys(spec), ['type', 'required', 'properties']);
    assert.deepEqual(
      Object.keys(spec.properties),
      ['allocations', 'cidr', 'extra', 'size'],
      'properties sorted by name',
    );
    assert.deepEqual(spec.properties.size, { type: 'integer', maximum: 1024, minimum: 1 });
    const early = await call(fake, 'GET', '/apis/ipam.example.com/v1/namespaces/default/ippools');
    assert.equal(early.status, 404, 'not served before NamesAccepted');
    assert.equal(early.text, '404 page not found\n');

    fake.establishCrds();
    const established = await waitFor('the CRD established', async () => {
      const crd = await call(fake, 'GET', `${CRDS_PATH}/ippools.ipam.example.com`);
      return crd.json.status.conditions?.length === 2 ? crd.json : undefined;
    });
    assert.deepEqual(
      established.status.conditions.map((c: Record<string, string>) => [c.type, c.status, c.reason, c.message]),
      [
        ['NamesAccepted', 'True', 'NoConflicts', 'no conflicts found'],
        ['Established', 'True', 'InitialNamesAccepted', 'the initial names have been accepted'],
      ],
    );
    assert.equal(
      Number(established.metadata.resourceVersion),
      Number(created.json.metadata.resourceVersion) + 2,
      'two writes',
    );
    const discovery = await call(fake, 'GET', '/apis/ipam.example.com/v1');
    assert.deepEqual(
      [discovery.json.kind, discovery.json.groupVersion, discovery.json.resources.map((r: { name: string }) => r.name)],
      ['APIResourceList', 'ipam.example.com/v1', ['ippools', 'ippools/status']],
    );
    assert.deepEqual(discovery.json.resources[1].verbs, ['get', 'patch', 'update']);
    const served = await call(fake, 'GET', '/apis/ipam.example.com/v1/namespaces/default/ippools');
    assert.deepEqual(served.json.items, []);
    const again = await call(fake, 'POST', CRDS_PATH, { body: IPPOOL_CRD });
    assert.deepEqual(
      [again.status, again.json.reason, again.json.details.kind],
      [409, 'AlreadyExists', 'customresourcedefinitions'],
    );
    for (const path of ['/apis/ipam.example.com/v1/nosuch', '/apis/ipam.example.com/v1/namespaces/default/ipamblocks'])
      assert.equal((await call(fake, 'GET', path)).text, '404 page not found\n', path);
  });

  it('§1 a CRD created over the API is established shortly after by itself (two writes), then served', async (t) => {
    const fake = await startFakeKubeApi();
    t.after(() => fake.stop());
    const created = await call(fake, 'POST', CRDS_PATH, { body: IPPOOL_CRD });
    assert.equal(created.status, 201);
    const served = await waitFor('the resource served', async () => {
      const listed = await call(fake, 'GET', '/apis/ipam.example.com/v1/namespaces/default/ippools');
      return listed.status === 200 ? listed : undefined;
    });
    assert.deepEqual(served.json.items, []);
    assert.equal(Number(fake.resourceVersion()), Number(created.json.metadata.resourceVersion) + 2);
  });

  it("§1 registers the repository's own CRDs from deploy/crds, with maxLength and maxItems checked", async (t) => {
    const fake = await startFakeKubeApi({ crds: 'deploy' });
    t.after(() => fake.stop());
    const plurals = ['warrenblocks', 'warrenblockpublications', 'warrenranges', 'warrenaddressrequests'];
    for (const plural of [...plurals, 'warrenaddressspaces', 'warrenreservations']) {
      const listed = await call(fake, 'GET', `/apis/warren.dev/v1alpha1/${plural}`);
      assert.deepEqual([listed.status, listed.json.items], [200, []], plural);
    }
    const blocks = '/apis/warren.dev/v1alpha1/warrenblocks';
    const body = (spec: Record<string, unknown>) => ({
      apiVersion: 'warren.dev/v1alpha1',
      kind: 'WarrenBlock',
      metadata: { name: 'b' },
      spec,
    });
    // Messages as field.TooLongMaxLength and field.TooMany word them (not in the record).
    const long = await call(fake, 'POST', blocks, { body: body({ pool: 'p', cidr: 'x'.repeat(65) }) });
    assert.equal(
      long.json.message,
      'WarrenBlock.warren.dev "b" is invalid: [spec.cidr: Too long: may not be longer than 64, spec.node: Required value]',
    );
    assert.deepEqual(long.json.details.causes[0].reason, 'FieldValueTooLong');
    assert.equal(
      (await call(fake, 'POST', blocks, { body: body({ pool: 'p', cidr: '10.0.0.0/26', node: 'n1' }) })).status,
      201,
    );
    const one = { address: '10.0.0.1', network: 'n', containerID: 'c', ifname: 'eth0' };
    const many = await call(fake, 'POST', '/apis/warren.dev/v1alpha1/warrenblockpublications', {
      body: {
        apiVersion: 'warren.dev/v1alpha1',
        kind: 'WarrenBlockPublication',
        metadata: { name: 'b' },
        spec: {
          pool: 'p',
          cidr: '10.0.0.0/26',
          node: 'n1',
          allocated: 4097,
          resting: 0,
          publishedAt: 1,
          allocations: Array.from({ length: 4097 }, () => one),
        },
      },
    });
    assert.equal(
      many.json.message,
      'WarrenBlockPublication.warren.dev "b" is invalid: spec.allocations: Too many: 4097: must have at most 4096 items',
    );
    assert.deepEqual(many.json.details.causes[0].reason, 'FieldValueTooMany');
  });

  it('§2 creates with server fields, sorted keys, unknown fields pruned and status dropped; a second create is AlreadyExists', async (t) => {
    const fake = await startedWith(t);
    const body = {
      apiVersion: 'ipam.example.com/v1',
      kind: 'IPPool',
      metadata: { name: 'pool-a', labels: { node: 'n1' } },
      spec: {
        cidr: '10.0.0.0/24',
        size: 256,
        allocations: { '10.0.0.1': 'pod-x' },
        extra: { anything: { deep: [1, 2] } },
        bogus: 'x',
      },
      status: { used: 5 },
      topLevelJunk: 1,
    };
    const created = await call(fake, 'POST', POOLS, { body, userAgent: 'curl/8.0' });
    assert.equal(created.status, 201);
    const m = created.json.metadata;
    assert.match(m.uid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.match(m.creationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(created.text, `${JSON.stringify(created.json)}\n`, 'compact JSON and one newline');
    assert.deepEqual(created.json, {
      apiVersion: 'ipam.example.com/v1',
      kind: 'IPPool',
      metadata: {
        creationTimestamp: m.creationTimestamp,
        generation: 1,
        labels: { node: 'n1' },
        managedFields: [
          {
            apiVersion: 'ipam.example.com/v1',
            fieldsType: 'FieldsV1',
            fieldsV1: {
              'f:metadata': { 'f:labels': { '.': {}, 'f:node': {} } },
              'f:spec': {
                '.': {},
                'f:allocations': { '.': {}, 'f:10.0.0.1': {} },
                'f:cidr': {},
                'f:extra': { '.': {}, 'f:anything': { '.': {}, 'f:deep': {} } },
                'f:size': {},
              },
            },
            manager: 'curl',
            operation: 'Update',
            time: m.creationTimestamp,
          },
        ],
        name: 'pool-a',
        namespace: 'default',
        resourceVersion: m.resourceVersion,
        uid: m.uid,
      },
      spec: {
        allocations: { '10.0.0.1': 'pod-x' },
        cidr: '10.0.0.0/24',
        extra: { anything: { deep: [1, 2] } },
        size: 256,
      },
    });
    assert.ok(keysSorted(created.json), 'keys sorted at every level');
    const again = await call(fake, 'POST', POOLS, { body });
    assert.equal(again.status, 409);
    assert.equal(
      again.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ippools.ipam.example.com \\"pool-a\\" already exists","reason":"AlreadyExists","details":{"name":"pool-a","group":"ipam.example.com","kind":"ippools"},"code":409}\n',
    );
    const generated = await call(fake, 'POST', POOLS, { body: { ...body, metadata: { generateName: 'pool-' } } });
    assert.match(generated.json.metadata.name, /^pool-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    assert.equal(generated.json.metadata.generateName, 'pool-');
    const clustered = await call(fake, 'POST', BLOCKS, {
      body: { ...block('b1'), metadata: { name: 'b1', namespace: 'default' } },
    });
    assert.deepEqual([clustered.status, clustered.json.metadata.namespace], [201, undefined], 'namespace dropped');
  });

  it('§2 refuses schema violations, bad names and bad create bodies with the recorded Status bodies', async (t) => {
    const fake = await startedWith(t);
    const pool = (name: string, spec: unknown, extra: Record<string, unknown> = {}) => ({
      apiVersion: 'ipam.example.com/v1',
      kind: 'IPPool',
      metadata: { name, ...extra },
      spec,
    });
    const bad1 = await call(fake, 'POST', POOLS, {
      body: pool('bad1', { cidr: 'not-a-cidr', size: 'big', allocations: { a: 5 } }),
    });
    assert.equal(
      bad1.text,
      `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"IPPool.ipam.example.com \\"bad1\\" is invalid: [spec.size: Invalid value: \\"string\\": spec.size in body must be of type integer: \\"string\\", spec.allocations.a: Invalid value: \\"integer\\": spec.allocations.a in body must be of type string: \\"integer\\", spec.cidr: Invalid value: \\"not-a-cidr\\": spec.cidr in body should match '^[0-9.]+/[0-9]+$']","reason":"Invalid","details":{"name":"bad1","group":"ipam.example.com","kind":"IPPool","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \\"string\\": spec.size in body must be of type integer: \\"string\\"","field":"spec.size"},{"reason":"FieldValueInvalid","message":"Invalid value: \\"integer\\": spec.allocations.a in body must be of type string: \\"integer\\"","field":"spec.allocations.a"},{"reason":"FieldValueInvalid","message":"Invalid value: \\"not-a-cidr\\": spec.cidr in body should match '^[0-9.]+/[0-9]+$'","field":"spec.cidr"}]},"code":422}\n`,
    );
    const bad2 = await call(fake, 'POST', POOLS, { body: pool('bad2', { size: 2000 }) });
    assert.equal(
      bad2.json.message,
      'IPPool.ipam.example.com "bad2" is invalid: [spec.size: Invalid value: 2000: spec.size in body should be less than or equal to 1024, spec.cidr: Required value]',
    );
    assert.deepEqual(bad2.json.details.causes[1], {
      reason: 'FieldValueRequired',
      message: 'Required value',
      field: 'spec.cidr',
    });
    const bad3 = await call(fake, 'POST', POOLS, { body: pool('bad3', { cidr: '10.0.0.0/8', size: 1.5 }) });
    assert.equal(
      bad3.json.message,
      'IPPool.ipam.example.com "bad3" is invalid: spec.size: Invalid value: "number": spec.size in body must be of type integer: "number"',
    );

    const upper = await call(fake, 'POST', POOLS, { body: pool('Upper', { cidr: '10.0.0.0/8' }) });
    assert.equal(
      upper.text,
      `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"IPPool.ipam.example.com \\"Upper\\" is invalid: metadata.name: Invalid value: \\"Upper\\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')","reason":"Invalid","details":{"name":"Upper","group":"ipam.example.com","kind":"IPPool","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \\"Upper\\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')","field":"metadata.name"}]},"code":422}\n`,
    );
    for (const name of ['10.0.0.0/26', 'fd00::0-122', 'a_b', '-a'])
      assert.equal((await call(fake, 'POST', BLOCKS, { body: block(name) })).status, 422, name);
    const long = await call(fake, 'POST', BLOCKS, { body: block('a'.repeat(254)) });
    assert.equal(
      long.json.details.causes[0].message,
      `Invalid value: "${'a'.repeat(254)}": must be no more than 253 characters`,
    );
    assert.equal((await call(fake, 'POST', BLOCKS, { body: block('a'.repeat(253)) })).status, 201);
    assert.equal((await call(fake, 'POST', BLOCKS, { body: block('10.0.0.0-26') })).status, 201);
    const nameless = await call(fake, 'POST', BLOCKS, { body: { ...block(''), metadata: {} } });
    assert.equal(
      nameless.json.message,
      'IPAMBlock.ipam.example.com "" is invalid: metadata.name: Required value: name or generateName is required',
    );
    assert.equal(nameless.json.details.name, undefined);
    assert.equal(nameless.json.details.causes[0].reason, 'FieldValueRequired');

    const wrongKind = await call(fake, 'POST', BLOCKS, { body: { ...block('wrongkind'), kind: 'IPPool' } });
    assert.equal(
      wrongKind.json.message,
      'IPPool.ipam.example.com "wrongkind" is invalid: kind: Invalid value: "IPPool": must be IPAMBlock',
    );
    const wrongVersion = await call(fake, 'POST', BLOCKS, {
      body: { ...block('v'), apiVersion: 'ipam.example.com/v2' },
    });
    assert.equal(
      wrongVersion.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the API version in the data (ipam.example.com/v2) does not match the expected API version (ipam.example.com/v1)","reason":"BadRequest","code":400}\n',
    );
    const { apiVersion: _a, ...noVersion } = block('nv');
    const missing = await call(fake, 'POST', BLOCKS, { body: noVersion });
    assert.equal(
      missing.text,
      `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Internal error occurred: Object 'apiVersion' is missing in 'object has no apiVersion field'","reason":"InternalError","details":{"causes":[{"message":"Object 'apiVersion' is missing in 'object has no apiVersion field'"}]},"code":500}\n`,
    );
    const otherNs = await call(fake, 'POST', POOLS, { body: pool('p', { cidr: '1.0.0.0/8' }, { namespace: 'other' }) });
    assert.equal(
      otherNs.json.message,
      'the namespace of the provided object does not match the namespace sent on the request',
    );
    const withRv = await call(fake, 'POST', BLOCKS, {
      body: { ...block('rv'), metadata: { name: 'rv', resourceVersion: '5' } },
    });
    assert.equal(
      withRv.text,
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"resourceVersion should not be set on objects to be created","code":500}\n',
    );
    const labels = await call(fake, 'POST', BLOCKS, { body: block('lab', { 'bad key': 'x', ok: 'a/b' }) });
    assert.deepEqual(
      labels.json.details.causes.map((c: { field: string }) => c.field),
      ['metadata.labels', 'metadata.labels'],
    );
    const yaml = await call(fake, 'POST', BLOCKS, {
      body: 'apiVersion: ipam.example.com/v1\nkind: IPAMBlock\nmetadata:\n  name: from-yaml\nspec:\n  cidr: 10.0.9.0/26\n',
      contentType: 'application/yaml',
    });
    assert.deepEqual([yaml.status, yaml.json.spec], [201, { cidr: '10.0.9.0/26' }]);
  });
});
