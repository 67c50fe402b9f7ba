/**
 * The fake Kubernetes API (test/helpers/fake-kube-api.ts) against @kubernetes/client-node 2.0.1
 * itself: if the library reads the fake's lists, watch streams and Status errors the way it reads
 * a real apiserver's, tests built on the fake exercise the wire Warren meets in a cluster. Each test
 * starts its own server and stops it however the test ends; nothing sleeps — watches are awaited
 * with deadlines.
 */
import assert from 'node:assert/strict';
import { request } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { type TestContext, describe, it } from 'node:test';
import { ApiException, CoreV1Api, KubeConfig, PatchStrategy, Watch, setHeaderOptions } from '@kubernetes/client-node';
import {
  type FakeKubeApi,
  type FakeKubeApiOptions,
  type KubeObject,
  type KubeStatus,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { HANG_BOUND_MS, waitFor } from '../helpers/processes.ts';

interface Started {
  readonly fake: FakeKubeApi;
  readonly kc: KubeConfig;
  readonly api: CoreV1Api;
}

async function started(t: TestContext, options?: FakeKubeApiOptions): Promise<Started> {
  const fake = await startFakeKubeApi(options);
  t.after(() => fake.stop());
  const kc = new KubeConfig();
  kc.loadFromFile(fake.kubeconfigPath);
  return { fake, kc, api: kc.makeApiClient(CoreV1Api) };
}

interface Seen {
  readonly type: string;
  readonly object: KubeObject & { status?: unknown };
}

interface Watching {
  readonly events: Seen[];
  /** Settles with what the library passed to done(): an error or null. */
  readonly done: Promise<unknown>;
  abort(): void;
}

/** Starts the library's Watch; resolves once the server has answered the request. */
async function watch(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | number | boolean | undefined>,
): Promise<Watching> {
  const events: Seen[] = [];
  let finish: (error: unknown) => void = () => undefined;
  const done = new Promise<unknown>((resolveDone) => (finish = resolveDone));
  const controller = await new Watch(kc).watch(
    path,
    query,
    (type, object) => events.push({ type, object }),
    (error) => finish(error ?? null),
  );
  return { events, done, abort: () => controller.abort() };
}

function within<T>(what: string, promise: Promise<T>, deadlineMs = HANG_BOUND_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>(
    (_, reject) =>
      (timer = setTimeout(() => reject(new Error(`timed out after ${deadlineMs} ms waiting for ${what}`)), deadlineMs)),
  );
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

const until = (what: string, events: readonly Seen[], count: number) =>
  waitFor(what, () => (events.length >= count ? true : undefined));

/** The Status body of an ApiException; the library leaves it as the raw JSON text. */
function statusOf(error: unknown): KubeStatus {
  assert.ok(error instanceof ApiException, `expected an ApiException, got ${String(error)}`);
  assert.equal(typeof error.body, 'string');
  return JSON.parse(error.body as string) as KubeStatus;
}

async function refusal(promise: Promise<unknown>): Promise<ApiException<unknown>> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ApiException, `expected an ApiException, got ${String(error)}`);
    return error;
  }
  throw new Error('expected the call to be refused');
}

interface RawResponse {
  readonly status: number;
  readonly httpVersion: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  readonly peerSubjectAltName: string | undefined;
}

/** One request over node:https, trusting the fake's CA; `firstLine` stops reading after one line of body. */
function raw(
  fake: FakeKubeApi,
  method: string,
  path: string,
  options: { token?: string | null; firstLine?: boolean } = {},
): Promise<RawResponse> {
  const token = options.token === undefined ? fake.token : options.token;
  return new Promise((resolveResponse, reject) => {
    const req = request(
      `${fake.url}${path}`,
      { method, ca: fake.caPem, headers: token === null ? {} : { Authorization: `Bearer ${token}` } },
      (res) => {
        const peer = (res.socket as TLSSocket).getPeerCertificate().subjectaltname;
        let body = '';
        const answer = () =>
          resolveResponse({
            status: res.statusCode ?? 0,
            httpVersion: res.httpVersion,
            headers: res.headers,
            body,
            peerSubjectAltName: peer,
          });
        res.on('data', (chunk: Buffer) => {
          body += chunk.toString('utf8');
          if (options.firstLine && body.includes('\n')) {
            answer();
            req.destroy();
          }
        });
        res.on('end', answer);
        res.on('error', () => undefined);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const pod = (namespace: string, name: string, nodeName?: string): KubeObject => ({
  metadata: { namespace, name },
  spec: { containers: [{ name: 'c', image: 'i' }], ...(nodeName === undefined ? {} : { nodeName }) },
});

const event = (namespace: string, name: string, extra: Record<string, unknown> = {}) => ({
  metadata: { name, namespace },
  involvedObject: { kind: 'Pod', apiVersion: 'v1', namespace, name: 'p1', uid: 'u-1' },
  reason: 'AddressReleased',
  message: 'released 10.0.0.5',
  type: 'Normal',
  source: { component: 'warren', host: 'node-a' },
  count: 1,
  firstTimestamp: new Date('2025-01-01T00:00:00.250Z'),
  lastTimestamp: new Date('2025-01-01T00:00:00.250Z'),
  ...extra,
});

describe('fake Kubernetes API, read by @kubernetes/client-node', () => {
  it('lists pods with the field selector applied and the current resourceVersion, and gets one by name', async (t) => {
    const { fake, api } = await started(t);
    fake.createPod(pod('ns1', 'a', 'node-a'));
    fake.createPod(pod('ns1', 'b', 'node-b'));
    const c = fake.createPod(pod('ns2', 'c', 'node-a'));

    const onA = await api.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=node-a' });
    assert.deepEqual(
      onA.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`),
      ['ns1/a', 'ns2/c'],
    );
    assert.equal(onA.metadata?.resourceVersion, fake.resourceVersion());
    assert.equal(onA.kind, 'PodList');

    const named = await api.listNamespacedPod({ namespace: 'ns1', fieldSelector: 'metadata.name=b' });
    assert.deepEqual(
      named.items.map((p) => p.metadata?.name),
      ['b'],
    );
    const labelled = await api.listNamespacedPod({ namespace: 'ns1', labelSelector: 'app=web' });
    assert.deepEqual(labelled.items, []);

    const got = await api.readNamespacedPod({ namespace: 'ns2', name: 'c' });
    assert.equal(got.metadata?.resourceVersion, c.metadata.resourceVersion);
    assert.equal(got.spec?.nodeName, 'node-a');
    assert.equal(got.status?.phase, 'Pending');

    const notFound = statusOf(await refusal(api.readNamespacedPod({ namespace: 'ns2', name: 'zz' })));
    assert.deepEqual([notFound.code, notFound.reason, notFound.message], [404, 'NotFound', 'pods "zz" not found']);
    const badField = statusOf(await refusal(api.listPodForAllNamespaces({ fieldSelector: 'spec.hostname=x' })));
    assert.deepEqual([badField.code, badField.message], [400, 'field label not supported: spec.hostname']);
    const setBased = await refusal(api.listPodForAllNamespaces({ labelSelector: 'app in (web)' }));
    assert.equal(setBased.code, 400, 'a selector the fake cannot apply is refused, not ignored');
  });

  it('a watch from the list RV sees ADDED, MODIFIED, MODIFIED (deletionTimestamp), DELETED in RV order, only for its node', async (t) => {
    const { fake, kc, api } = await started(t);
    const list = await api.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=node-a' });
    const from = list.metadata?.resourceVersion as string;
    const live = await watch(kc, '/api/v1/pods', {
      fieldSelector: 'spec.nodeName=node-a',
      resourceVersion: from,
      allowWatchBookmarks: true,
    });

    fake.createPod(pod('ns1', 'p1', 'node-a'));
    fake.createPod(pod('ns1', 'elsewhere', 'node-b'));
    fake.setPodPhase('ns1', 'p1', 'Running');
    fake.deletePod('ns1', 'p1');
    assert.ok(
      fake.getPod('ns1', 'p1')?.metadata.deletionTimestamp,
      'a running pod bound to a node waits for its kubelet',
    );
    fake.deletePod('ns1', 'p1');
    assert.equal(fake.getPod('ns1', 'p1'), undefined);
    await until('DELETED', live.events, 4);

    assert.deepEqual(
      live.events.map((e) => `${e.type} ${e.object.metadata.name}`),
      ['ADDED p1', 'MODIFIED p1', 'MODIFIED p1', 'DELETED p1'],
    );
    assert.equal(live.events[2]?.object.metadata.deletionTimestamp !== undefined, true);
    const rvs = live.events.map((e) => Number(e.object.metadata.resourceVersion));
    assert.deepEqual(
      rvs,
      [...rvs].sort((x, y) => x - y),
    );
    assert.ok((rvs[0] as number) > Number(from));
    assert.equal(live.events[0]?.object.kind, 'Pod', 'watch objects carry kind and apiVersion');

    // The same RV watched afterwards replays the history to the same sequence.
    const replay = await watch(kc, '/api/v1/namespaces/ns1/pods', {
      fieldSelector: 'spec.nodeName=node-a',
      resourceVersion: from,
    });
    await until('the replay', replay.events, 4);
    assert.deepEqual(
      replay.events.map((e) => `${e.type} ${e.object.metadata.resourceVersion}`),
      live.events.map((e) => `${e.type} ${e.object.metadata.resourceVersion}`),
    );
    replay.abort();
    live.abort();
  });

  it('removes a pod at once on a force delete, and an unbound or finished pod on a normal one', async (t) => {
    const { fake, kc } = await started(t);
    fake.createPod(pod('ns1', 'running', 'node-a'));
    fake.createPod(pod('ns1', 'unbound'));
    fake.createPod(pod('ns1', 'done', 'node-a'));
    fake.setPodPhase('ns1', 'done', 'Succeeded');
    const deletions = await watch(kc, '/api/v1/pods', { resourceVersion: fake.resourceVersion() });
    fake.deletePod('ns1', 'running', { force: true });
    fake.deletePod('ns1', 'unbound');
    fake.deletePod('ns1', 'done');
    await until('three DELETED', deletions.events, 3);
    assert.deepEqual(
      deletions.events.map((e) => `${e.type} ${e.object.metadata.name}`),
      ['DELETED running', 'DELETED unbound', 'DELETED done'],
    );
    assert.equal(deletions.events[0]?.object.metadata.deletionGracePeriodSeconds, 0);
    deletions.abort();
  });

  it('a pod entering its watch selector arrives as ADDED and one leaving it as DELETED, like the watch cache', async (t) => {
    const { fake, kc } = await started(t);
    fake.createPod(pod('ns1', 'q', 'node-a'));
    const running = await watch(kc, '/api/v1/pods', {
      fieldSelector: 'status.phase=Running',
      resourceVersion: fake.resourceVersion(),
    });
    fake.setPodPhase('ns1', 'q', 'Running');
    const left = fake.setPodPhase('ns1', 'q', 'Succeeded');
    await until('two events', running.events, 2);
    assert.deepEqual(
      running.events.map((e) => e.type),
      ['ADDED', 'DELETED'],
    );
    const gone = running.events[1]?.object;
    assert.equal(gone?.metadata.resourceVersion, left.metadata.resourceVersion, 'at the RV of the change');
    assert.deepEqual(gone?.status, { phase: 'Running' }, 'with its last state that matched');
    running.abort();
  });

  it('a watch without a resourceVersion starts with an ADDED for each object present', async (t) => {
    const { fake, kc } = await started(t);
    fake.createPod(pod('ns1', 'x', 'node-a'));
    fake.createPod(pod('ns1', 'y', 'node-b'));
    const fresh = await watch(kc, '/api/v1/pods', { fieldSelector: 'spec.nodeName=node-a' });
    await until('the initial ADDED', fresh.events, 1);
    assert.deepEqual(
      fresh.events.map((e) => `${e.type} ${e.object.metadata.name}`),
      ['ADDED x'],
    );
    fresh.abort();
  });

  it('attributes requests and delivered watch events to the client whose own token made them', async (t) => {
    const { fake, api } = await started(t);
    const clientOf = (name: string): KubeConfig => {
      const kc = new KubeConfig();
      kc.loadFromFile(fake.clientKubeconfig(name));
      return kc;
    };
    const [a, b] = [clientOf('node-a'), clientOf('node-b')];
    const onA = await watch(a, '/api/v1/pods', { fieldSelector: 'spec.nodeName=node-a' });
    const onB = await watch(b, '/api/v1/pods', { fieldSelector: 'spec.nodeName=node-b' });
    await api.listPodForAllNamespaces();
    fake.createPod(pod('ns1', 'x', 'node-a'));
    fake.setPodPhase('ns1', 'x', 'Running');
    await until('two events on node-a', onA.events, 2);
    assert.deepEqual(
      fake.requests.map((r) => `${r.verb} ${r.resource} ${r.client ?? '-'}`),
      ['watch pods node-a', 'watch pods node-b', 'list pods -'],
    );
    assert.deepEqual(fake.watchEvents(), [
      { resource: 'pods', client: 'node-a', type: 'ADDED', count: 1 },
      { resource: 'pods', client: 'node-a', type: 'MODIFIED', count: 1 },
    ]);
    assert.equal(onB.events.length, 0, 'a change to node-a is delivered to node-a alone');
    fake.clearRequests();
    assert.deepEqual(fake.watchEvents(), []);
    onA.abort();
    onB.abort();
  });

  it('sends a BOOKMARK, holding only kind, apiVersion and resourceVersion, only to watches that allowed bookmarks', async (t) => {
    const { fake, kc } = await started(t);
    const from = fake.resourceVersion();
    const allowed = await watch(kc, '/api/v1/pods', { resourceVersion: from, allowWatchBookmarks: true });
    const plain = await watch(kc, '/api/v1/pods', { resourceVersion: from });
    fake.bookmark();
    fake.createPod(pod('ns1', 'after-bookmark', 'node-a'));
    await until('bookmark and ADDED', allowed.events, 2);
    await until('ADDED', plain.events, 1);
    assert.deepEqual(allowed.events[0], {
      type: 'BOOKMARK',
      object: { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: from } },
    });
    assert.deepEqual(
      plain.events.map((e) => e.type),
      ['ADDED'],
      'the ADDED after the bookmark came first: no bookmark was sent',
    );
    allowed.abort();
    plain.abort();
  });

  it('answers a too-old resourceVersion with 410: as an ERROR event with a Status, then as the HTTP status', async (t) => {
    const { fake, kc } = await started(t);
    fake.createPod(pod('ns1', 'old', 'node-a'));
    const old = fake.resourceVersion();
    fake.createPod(pod('ns1', 'new', 'node-a'));
    fake.compactHistory();

    const asEvent = await watch(kc, '/api/v1/pods', { resourceVersion: old });
    assert.equal(
      await within('done after the ERROR event', asEvent.done),
      null,
      'the library ends the watch with done(null) after the stream closes',
    );
    assert.equal(asEvent.events.length, 1);
    assert.equal(asEvent.events[0]?.type, 'ERROR');
    const status = asEvent.events[0]?.object as unknown as KubeStatus;
    assert.deepEqual(
      { ...status, message: undefined },
      {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: undefined,
        reason: 'Expired',
        code: 410,
      },
    );
    assert.match(status.message, /^too old resource version: \d+ \(\d+\)$/);

    fake.expireNextWatch('status');
    const asStatus = await watch(kc, '/api/v1/pods', { resourceVersion: fake.resourceVersion() });
    const error = (await within('done with 410', asStatus.done)) as Error & { statusCode?: number };
    assert.equal(
      error.statusCode,
      410,
      'the library reports an HTTP 410 as done(error) with statusCode, before any event',
    );
    assert.equal(error.message, 'Gone');
    assert.deepEqual(asStatus.events, []);

    // The current RV is not too old: the next watch (nothing queued) runs.
    const current = await watch(kc, '/api/v1/pods', { resourceVersion: fake.resourceVersion() });
    fake.createPod(pod('ns1', 'later', 'node-a'));
    await until('ADDED after compaction', current.events, 1);
    current.abort();
    assert.deepEqual(
      fake.requests.filter((r) => r.verb === 'watch').map((r) => r.status),
      [200, 410, 200],
    );
  });

  it('can answer every too-old resourceVersion with the HTTP status', async (t) => {
    const { fake, kc } = await started(t, { expiredAs: 'status' });
    const old = fake.resourceVersion();
    fake.createNode('node-a');
    fake.compactHistory();
    const refused = await watch(kc, '/api/v1/nodes', { resourceVersion: old });
    assert.equal(((await within('done', refused.done)) as { statusCode?: number }).statusCode, 410);
  });

  it('refuses a forbidden verb with 403 and a Status naming verb, resource and scope like RBAC', async (t) => {
    const { fake, kc, api } = await started(t);
    fake.forbid('list', 'pods');
    const cluster = statusOf(await refusal(api.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=node-a' })));
    assert.deepEqual(cluster, {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'pods is forbidden: User "system:serviceaccount:warren:warren" cannot list resource "pods" in API group "" at the cluster scope',
      reason: 'Forbidden',
      details: { kind: 'pods' },
      code: 403,
    });
    const namespaced = statusOf(await refusal(api.listNamespacedPod({ namespace: 'ns1' })));
    assert.match(namespaced.message, /cannot list resource "pods" in API group "" in the namespace "ns1"$/);

    fake.forbid('watch', 'pods');
    const watching = await watch(kc, '/api/v1/pods', {});
    assert.equal(((await within('done with 403', watching.done)) as { statusCode?: number }).statusCode, 403);

    fake.allow('list', 'pods');
    assert.deepEqual((await api.listPodForAllNamespaces()).items, []);
  });

  it('refuses a wrong or missing bearer token with 401 and a Status body', async (t) => {
    const { fake, api } = await started(t);
    const wrong = new KubeConfig();
    wrong.loadFromFile(fake.writeKubeconfig({ token: 'not-the-token' }));
    const refused = await refusal(wrong.makeApiClient(CoreV1Api).listPodForAllNamespaces());
    assert.equal(refused.code, 401);
    assert.equal(refused.body, undefined, 'the library drops the body of a 401');
    const anonymous = await raw(fake, 'GET', '/api/v1/pods', { token: null });
    assert.equal(anonymous.status, 401);
    assert.deepEqual(JSON.parse(anonymous.body), {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'Unauthorized',
      reason: 'Unauthorized',
      code: 401,
    });
    assert.deepEqual((await api.listPodForAllNamespaces()).items, [], 'the right token still works');
  });

  it('creates events validated like the apiserver, and patches them by merge patch', async (t) => {
    const { fake, api } = await started(t);
    const created = await api.createNamespacedEvent({ namespace: 'ns1', body: event('ns1', 'p1.release') });
    assert.equal(created.metadata?.name, 'p1.release');
    assert.ok(created.metadata?.uid);
    assert.equal(
      fake.listEvents('ns1')[0]?.lastTimestamp,
      '2025-01-01T00:00:00Z',
      'timestamps kept to the second, like metav1.Time',
    );

    const duplicate = statusOf(
      await refusal(api.createNamespacedEvent({ namespace: 'ns1', body: event('ns1', 'p1.release') })),
    );
    assert.deepEqual(
      [duplicate.code, duplicate.reason, duplicate.message],
      [409, 'AlreadyExists', 'events "p1.release" already exists'],
    );

    const bad = event('ns1', 'bad', {
      reason: '',
      type: 'Info',
      involvedObject: { kind: 'Pod', namespace: 'other', name: 'p1' },
    });
    const invalid = statusOf(await refusal(api.createNamespacedEvent({ namespace: 'ns1', body: bad })));
    assert.deepEqual([invalid.code, invalid.reason, invalid.details?.kind], [422, 'Invalid', 'Event']);
    assert.deepEqual(
      invalid.details?.causes?.map((c) => c.field),
      ['involvedObject.namespace', 'reason', 'type'],
    );
    assert.equal(
      invalid.message,
      'Event "bad" is invalid: [involvedObject.namespace: Invalid value: "other": does not match event.namespace, reason: Required value, type: Unsupported value: "Info": supported values: "Normal", "Warning"]',
    );
    const nameless = statusOf(
      await refusal(
        api.createNamespacedEvent({ namespace: 'ns1', body: { ...event('ns1', ''), metadata: { namespace: 'ns1' } } }),
      ),
    );
    assert.equal(
      nameless.message,
      'Event "" is invalid: metadata.name: Required value: name or generateName is required',
    );
    const elsewhere = statusOf(
      await refusal(api.createNamespacedEvent({ namespace: 'ns1', body: event('ns2', 'moved') })),
    );
    assert.deepEqual(
      [elsewhere.code, elsewhere.message],
      [400, 'the namespace of the provided object does not match the namespace sent on the request'],
    );
    const reused = await refusal(
      api.createNamespacedEvent({
        namespace: 'ns1',
        body: { ...event('ns1', 'again'), metadata: { name: 'again', resourceVersion: '7' } },
      }),
    );
    assert.equal(reused.code, 500, 'a resourceVersion on create is refused, as by the apiserver');
    const generated = await api.createNamespacedEvent({
      namespace: 'ns1',
      body: { ...event('ns1', ''), metadata: { generateName: 'p1.' } },
    });
    assert.match(generated.metadata?.name ?? '', /^p1\.[a-z0-9]{5}$/);

    // The library's default PATCH content type is JSON Patch, which needs an array of operations.
    const asJsonPatch = statusOf(
      await refusal(api.patchNamespacedEvent({ namespace: 'ns1', name: 'p1.release', body: { count: 2 } })),
    );
    assert.equal(asJsonPatch.code, 400);
    const merged = await api.patchNamespacedEvent(
      {
        namespace: 'ns1',
        name: 'p1.release',
        body: { count: 2, message: 'released 10.0.0.5 again', lastTimestamp: '2025-01-01T00:01:00Z' },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    assert.deepEqual(
      [merged.count, merged.message, merged.lastTimestamp?.toISOString()],
      [2, 'released 10.0.0.5 again', '2025-01-01T00:01:00.000Z'],
    );
    assert.ok(Number(merged.metadata?.resourceVersion) > Number(created.metadata?.resourceVersion));
    const strategic = await api.patchNamespacedEvent(
      { namespace: 'ns1', name: 'p1.release', body: { count: 3 } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    assert.equal(strategic.count, 3);
    const operations = await api.patchNamespacedEvent({
      namespace: 'ns1',
      name: 'p1.release',
      body: [{ op: 'replace', path: '/count', value: 4 }],
    });
    assert.equal(operations.count, 4);
    const missing = statusOf(
      await refusal(
        api.patchNamespacedEvent(
          { namespace: 'ns1', name: 'nope', body: { count: 2 } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        ),
      ),
    );
    assert.deepEqual([missing.code, missing.reason, missing.message], [404, 'NotFound', 'events "nope" not found']);

    const patches = fake.requests.filter((r) => r.verb === 'patch');
    assert.deepEqual(
      patches.map((r) => `${r.contentType} ${r.status}`),
      [
        'application/json-patch+json 400',
        'application/merge-patch+json 200',
        'application/strategic-merge-patch+json 200',
        'application/json-patch+json 200',
        'application/merge-patch+json 404',
      ],
    );
    assert.deepEqual(
      new Set(fake.requests.map((r) => `${r.method} ${r.verb}`)),
      new Set(['POST create', 'PATCH patch']),
    );
    assert.equal(fake.listEvents().find((e) => e.metadata.name === 'p1.release')?.count, 4);
  });

  it('ends the library watch with done(error) when the stream is cut, and done(null) when it ends or times out', async (t) => {
    const { fake, kc } = await started(t);
    const cut = await watch(kc, '/api/v1/pods', { resourceVersion: fake.resourceVersion() });
    fake.createPod(pod('ns1', 'p', 'node-a'));
    await until('ADDED', cut.events, 1);
    fake.breakWatches();
    const error = await within('done after the cut', cut.done);
    assert.ok(error instanceof Error, `a cut stream is an error for the library, got ${String(error)}`);

    const ended = await watch(kc, '/api/v1/pods', { resourceVersion: fake.resourceVersion() });
    assert.equal(fake.watchCount('pods'), 1);
    fake.endWatches();
    assert.equal(await within('done after a clean end', ended.done), null);

    const timed = await watch(kc, '/api/v1/pods', { resourceVersion: fake.resourceVersion(), timeoutSeconds: 1 });
    assert.equal(await within('done after timeoutSeconds', timed.done), null);
    assert.equal(fake.watchCount(), 0);
  });

  it('serves nodes: list with a field selector, get, and a watch that sees updates and deletion', async (t) => {
    const { fake, kc, api } = await started(t);
    fake.createNode('node-a');
    fake.createNode({ metadata: { name: 'node-b', labels: { role: 'worker' } }, spec: {} });
    const list = await api.listNode({ fieldSelector: 'metadata.name=node-b' });
    assert.deepEqual(
      list.items.map((n) => n.metadata?.name),
      ['node-b'],
    );
    assert.equal((await api.listNode({ labelSelector: 'role=worker' })).items.length, 1);
    assert.equal((await api.readNode({ name: 'node-a' })).metadata?.name, 'node-a');

    const nodes = await watch(kc, '/api/v1/nodes', {
      resourceVersion: list.metadata?.resourceVersion,
      allowWatchBookmarks: true,
    });
    fake.updateNode('node-a', (node) => {
      node.spec = { unschedulable: true };
    });
    fake.deleteNode('node-a');
    fake.bookmark();
    await until('MODIFIED, DELETED and BOOKMARK', nodes.events, 3);
    assert.deepEqual(
      nodes.events.map((e) => `${e.type} ${e.object.kind}`),
      ['MODIFIED Node', 'DELETED Node', 'BOOKMARK Node'],
    );
    nodes.abort();
  });

  it('refuses connections while unavailable, or answers 503, and serves again on the same URL', async (t) => {
    const { fake, kc, api } = await started(t);
    const open = await watch(kc, '/api/v1/pods', {});
    await fake.setUnavailable(true);
    assert.ok((await within('the open watch to end', open.done)) instanceof Error);
    await assert.rejects(api.listPodForAllNamespaces(), (error: Error & { cause?: { code?: string } }) => {
      assert.equal(error.cause?.code, 'ECONNREFUSED', String(error));
      return true;
    });
    await fake.setUnavailable(false);
    assert.deepEqual((await api.listPodForAllNamespaces()).items, []);

    await fake.setUnavailable(true, '503');
    const away = statusOf(await refusal(api.listPodForAllNamespaces()));
    assert.deepEqual([away.code, away.reason], [503, 'ServiceUnavailable']);
    await fake.setUnavailable(false);
    assert.deepEqual((await api.listPodForAllNamespaces()).items, []);
  });

  it('speaks HTTP/1.1 over TLS for 127.0.0.1, streams watches chunked, and answers unknown paths and methods with a Status', async (t) => {
    const { fake } = await started(t);
    fake.createPod(pod('ns1', 'w', 'node-a'));
    const stream = await raw(fake, 'GET', '/api/v1/pods?watch=1&resourceVersion=0', { firstLine: true });
    assert.equal(stream.httpVersion, '1.1');
    assert.equal(stream.headers['transfer-encoding'], 'chunked');
    assert.equal(stream.headers['content-type'], 'application/json');
    assert.equal(stream.peerSubjectAltName, 'IP Address:127.0.0.1, DNS:localhost');
    assert.equal((JSON.parse(stream.body.split('\n')[0] as string) as Seen).type, 'ADDED');

    const unknown = await raw(fake, 'GET', '/apis/apps/v1/deployments');
    assert.deepEqual(
      [unknown.status, unknown.headers['content-type'], (JSON.parse(unknown.body) as KubeStatus).reason],
      [404, 'application/json', 'NotFound'],
    );
    const method = await raw(fake, 'POST', '/api/v1/pods');
    assert.deepEqual([method.status, (JSON.parse(method.body) as KubeStatus).reason], [405, 'MethodNotAllowed']);
    assert.deepEqual(
      fake.requests.map((r) => `${r.method} ${r.path} ${r.verb} ${r.status}`),
      ['GET /api/v1/pods watch 200', 'GET /apis/apps/v1/deployments undefined 404', 'POST /api/v1/pods create 405'],
    );
    assert.deepEqual(fake.requests[0]?.query, { watch: '1', resourceVersion: '0' });
  });
});
