/**
 * The handle a test holds (`FakeKubeApi`): the listener's lifecycle, kubeconfigs, the cluster as the
 * test drives it (pods, nodes, CRDs, preloaded objects), and the faults it injects. Requests go to
 * server.ts. It serves HTTPS, HTTP/1.1 only by default; with `http2` it offers h2 and http/1.1 by
 * ALPN (node:http2's secure server with allowHTTP1), as a kube-apiserver does, and each request or
 * watch of an HTTP/2 client is a stream, recorded and counted as a request over HTTP/1.1 is. Either
 * way it counts the TLS connections clients made (`connectionCounts`).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import { type ServerHttp2Session, createSecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { Server, TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { removeDir, tempDir } from '../processes.ts';
import { issueServerCertificate } from '../tls.ts';
import { CoreResources } from './core.ts';
import { deployCrds } from './crds.ts';
import { LEASES } from './leases.ts';
import { STATEFULSETS } from './statefulsets.ts';
import { rfc3339, sortKeys } from './metadata.ts';
import { ObjectStore, type StoreSnapshot } from './objects.ts';
import { CrdRegistry } from './registry.ts';
import { RequestHandler } from './server.ts';
import type { Served } from './served.ts';
import type {
  CrdObject,
  DeliveredEvents,
  ConnectionCounts,
  ExpiredAs,
  FakeKubeApi,
  FakeSnapshot,
  FakeKubeApiOptions,
  KubeObject,
  RequestRecord,
  Unavailability,
  Verb,
} from './types.ts';
import { WatchHub } from './watch.ts';

const DEFAULT_USER = 'system:serviceaccount:warren:warren';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

class FakeKubeApiServer implements FakeKubeApi {
  readonly url: string;
  readonly kubeconfigPath: string;
  readonly token: string;
  readonly caPem: string;
  readonly #server: Server;
  readonly #port: number;
  /** Holds the certificates and kubeconfigs; removed on stop. */
  readonly #dir: string;
  readonly #now: () => Date;
  readonly #store = new ObjectStore();
  readonly #core: CoreResources;
  readonly #crds: CrdRegistry;
  readonly #hub: WatchHub;
  readonly #handler: RequestHandler;
  #listening = true;
  #stopped = false;
  /** Clients' TLS connections open now, and how many were ever accepted. */
  readonly #sockets = new Set<TLSSocket>();
  #accepted = 0;
  /** HTTP/2 sessions open now (`goAway`). */
  readonly #sessions = new Set<ServerHttp2Session>();

  constructor(
    server: Server,
    port: number,
    dir: string,
    caPem: string,
    options: FakeKubeApiOptions & { token: string },
  ) {
    this.#server = server;
    this.#port = port;
    this.#dir = dir;
    this.url = `https://127.0.0.1:${port}`;
    this.caPem = caPem;
    this.token = options.token;
    this.#now = options.now ?? (() => new Date());
    this.#core = new CoreResources(this.#store, this.#now);
    this.#crds = new CrdRegistry(this.#store, this.#now, options.crdEstablishMs ?? 20);
    this.#hub = new WatchHub(this.#store);
    this.#handler = new RequestHandler(
      { store: this.#store, core: this.#core, crds: this.#crds, hub: this.#hub },
      {
        base: this.url,
        token: options.token,
        user: options.user ?? DEFAULT_USER,
        now: this.#now,
        expiredAs: options.expiredAs ?? 'event',
        latency: options.writeLatencyMs ?? 0,
      },
    );
    const crds = options.crds === 'deploy' ? deployCrds() : (options.crds ?? []);
    for (const crd of crds) this.registerCrd(crd);
    this.kubeconfigPath = this.writeKubeconfig();
    server.on('request', (req: IncomingMessage, res: ServerResponse) => void this.#handler.handle(req, res));
    server.on('secureConnection', (socket: TLSSocket) => {
      this.#accepted++;
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    server.on('session', (session: ServerHttp2Session) => {
      this.#sessions.add(session);
      session.on('close', () => this.#sessions.delete(session));
    });
    server.on('sessionError', () => undefined); // a client gone mid-session is no fault of the fake
  }

  connectionCounts(): ConnectionCounts {
    return { open: this.#sockets.size, accepted: this.#accepted, http2Sessions: this.#sessions.size };
  }

  get requests(): readonly RequestRecord[] {
    return this.#handler.records;
  }

  clearRequests(): void {
    this.#handler.records.length = 0;
    this.#handler.counts = new Map();
    this.#hub.delivered.clear();
  }

  requestCounts(): Record<string, number> {
    return Object.fromEntries([...this.#handler.counts].sort(([a], [b]) => (a < b ? -1 : 1)));
  }

  writeKubeconfig(options: { token?: string } = {}): string {
    const token = options.token ?? this.token;
    const path = join(this.#dir, token === this.token ? 'kubeconfig' : `kubeconfig-${randomBytes(4).toString('hex')}`);
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'fake',
          cluster: { server: this.url, 'certificate-authority-data': Buffer.from(this.caPem).toString('base64') },
        },
      ],
      users: [{ name: 'warren', user: { token } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'warren', namespace: 'default' } }],
      'current-context': 'fake',
    };
    writeFileSync(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
    return path;
  }

  clientKubeconfig(name: string): string {
    const known = [...this.#handler.clients].find(([, client]) => client === name)?.[0];
    const token = known ?? `${this.token}-${randomBytes(8).toString('hex')}`;
    this.#handler.clients.set(token, name);
    return this.writeKubeconfig({ token });
  }

  watchEvents(): readonly DeliveredEvents[] {
    return [...this.#hub.delivered.values()].map((d) => ({ ...d }));
  }

  resourceVersion(): string {
    return String(this.#store.rv);
  }

  watchCount(resource?: string): number {
    let count = 0;
    for (const watcher of this.#hub.watchers) if (resource === undefined || watcher.resource === resource) count++;
    return count;
  }

  // --- The cluster, as tests drive it -------------------------------------------------------------

  createPod(pod: KubeObject): KubeObject {
    const spec = isRecord(pod.spec) ? pod.spec : { containers: [] };
    const status = isRecord(pod.status) ? pod.status : {};
    return this.#core.create('pods', { ...pod, spec, status: { phase: 'Pending', ...status } });
  }

  getPod(namespace: string, name: string): KubeObject | undefined {
    const pod = this.#store.get('pods', `${namespace}/${name}`);
    return pod === undefined ? undefined : structuredClone(pod);
  }

  updatePod(namespace: string, name: string, change: (pod: KubeObject) => void): KubeObject {
    return this.#core.update('pods', `${namespace}/${name}`, change);
  }

  setPodPhase(namespace: string, name: string, phase: string): KubeObject {
    return this.updatePod(namespace, name, (pod) => {
      pod.status = { ...(isRecord(pod.status) ? pod.status : {}), phase };
    });
  }

  deletePod(namespace: string, name: string, options: { force?: boolean } = {}): void {
    const key = `${namespace}/${name}`;
    const pod = this.#core.existing('pods', key);
    const spec = isRecord(pod.spec) ? pod.spec : {};
    const phase = isRecord(pod.status) ? pod.status.phase : undefined;
    const immediate = options.force === true || !spec.nodeName || phase === 'Succeeded' || phase === 'Failed';
    if (immediate || pod.metadata.deletionTimestamp !== undefined) {
      this.#core.remove('pods', key, (last) => {
        last.metadata.deletionTimestamp ??= rfc3339(this.#now());
        last.metadata.deletionGracePeriodSeconds = 0;
      });
      return;
    }
    const grace = typeof spec.terminationGracePeriodSeconds === 'number' ? spec.terminationGracePeriodSeconds : 30;
    this.#core.update('pods', key, (marked) => {
      marked.metadata.deletionTimestamp = rfc3339(new Date(this.#now().getTime() + grace * 1000));
      marked.metadata.deletionGracePeriodSeconds = grace;
    });
  }

  createNode(node: KubeObject | string): KubeObject {
    return this.#core.create(
      'nodes',
      typeof node === 'string' ? { metadata: { name: node }, spec: {}, status: {} } : node,
    );
  }

  updateNode(name: string, change: (node: KubeObject) => void): KubeObject {
    return this.#core.update('nodes', name, change);
  }

  deleteNode(name: string): void {
    this.#core.remove('nodes', name, () => undefined);
  }

  /** A namespace as the real server keeps one: the `kubernetes` finalizer, phase Active. */
  createNamespace(
    name: string,
    meta: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
  ): KubeObject {
    return this.#core.create('namespaces', {
      metadata: {
        name,
        labels: { 'kubernetes.io/metadata.name': name, ...meta.labels },
        ...(meta.annotations === undefined ? {} : { annotations: meta.annotations }),
      },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    });
  }

  updateNamespace(name: string, change: (namespace: KubeObject) => void): KubeObject {
    return this.#core.update('namespaces', name, change);
  }

  listEvents(namespace?: string): KubeObject[] {
    const map = this.#store.map('events');
    return [...map.values()]
      .filter((e) => namespace === undefined || e.metadata.namespace === namespace)
      .map((e) => structuredClone(e));
  }

  registerCrd(crd: CrdObject): void {
    this.#crds.register(crd);
  }

  establishCrds(): void {
    this.#crds.establishPending();
  }

  #servedByPlural(plural: string): Served {
    const served =
      plural === 'leases' ? LEASES : plural === 'statefulsets' ? STATEFULSETS : this.#crds.byPlural(plural);
    if (served === undefined) throw new Error(`fake kube api: no served resource ${plural}`);
    return served;
  }

  preload(plural: string, objects: Iterable<KubeObject>): void {
    const s = this.#servedByPlural(plural);
    const time = rfc3339(this.#now());
    const store = this.#store;
    function* entries(): Generator<readonly [string, KubeObject]> {
      for (const object of objects) {
        const meta = object.metadata;
        object.apiVersion ??= s.apiVersion;
        object.kind ??= s.kind;
        meta.uid ??= randomUUID();
        meta.creationTimestamp ??= time;
        if (s.generation) meta.generation ??= 1;
        if (s.namespaced) meta.namespace ??= 'default';
        else delete meta.namespace;
        meta.resourceVersion = ''; // its place in the key order; the store fills it in
        // Custom resources are stored in wire order (sorted keys), as writes store them.
        yield [ObjectStore.keyOf(object, s.namespaced), s.custom ? (sortKeys(object) as KubeObject) : object];
      }
    }
    store.preload(s.plural, entries());
  }

  object(plural: string, name: string, namespace?: string): KubeObject | undefined {
    const s = this.#servedByPlural(plural);
    const found = this.#store.get(s.plural, s.namespaced ? `${namespace}/${name}` : name);
    return found === undefined ? undefined : (structuredClone(s.encode(found)) as KubeObject);
  }

  objects(plural: string): KubeObject[] {
    const s = this.#servedByPlural(plural);
    const map = this.#store.map(s.plural);
    return this.#store.keys(s.plural).map((key) => structuredClone(map.get(key) as KubeObject));
  }

  deleteObject(plural: string, name: string, namespace?: string): boolean {
    const s = this.#servedByPlural(plural);
    const key = s.namespaced ? `${namespace}/${name}` : name;
    const old = this.#store.get(s.plural, key);
    if (old === undefined) return false;
    this.#store.commit(s.plural, key, 'DELETED', structuredClone(old), old);
    return true;
  }

  editObject(plural: string, name: string, change: (object: KubeObject) => void, namespace?: string): boolean {
    const s = this.#servedByPlural(plural);
    const key = s.namespaced ? `${namespace}/${name}` : name;
    const old = this.#store.get(s.plural, key);
    if (old === undefined) return false;
    const edited = structuredClone(old);
    change(edited);
    this.#store.commit(s.plural, key, 'MODIFIED', edited, old);
    return true;
  }

  setWriteLatency(ms: number): void {
    this.#handler.writeLatencyMs = ms;
  }

  /** As an agent killed -9 between the API server's commit and its answer sees it (types.ts). */
  holdNextCreate(plural: string): { readonly applied: Promise<void>; readonly release: () => void } {
    let release = (): void => undefined;
    let applied = (): void => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const seen = new Promise<void>((resolve) => {
      applied = resolve;
    });
    this.#handler.holds.set(`create ${plural}`, { applied, release: released });
    return { applied: seen, release };
  }

  // --- Faults ---------------------------------------------------------------------------------------

  snapshot(): FakeSnapshot {
    return this.#store.snapshot();
  }

  restoreSnapshot(snapshot: FakeSnapshot, options: { bumpRevision?: number } = {}): void {
    if (!('maps' in snapshot)) throw new Error('fake kube api: not a snapshot of this fake');
    this.#store.restore(snapshot as StoreSnapshot, options.bumpRevision ?? 0);
    // The apiserver restarts over the restored etcd: its watches end; clients watch again.
    this.endWatches();
  }

  compactHistory(): void {
    this.#store.compact();
  }

  expireNextWatch(as: ExpiredAs = this.#handler.expiredAs): void {
    this.#hub.pendingExpiries.push(as);
  }

  bookmark(): void {
    this.#hub.bookmarkAll();
  }

  breakWatches(): void {
    this.#hub.close('destroy');
  }

  cutConnections(): void {
    for (const socket of this.#sockets) socket.destroy();
  }

  goAway(): void {
    for (const session of this.#sessions) session.close();
  }

  endWatches(): void {
    this.#hub.close('end');
  }

  terminateNamespace(namespace: string): void {
    this.#core.terminating.add(namespace);
  }

  forbid(verb: Verb, resource: string): void {
    this.#handler.forbidden.add(`${verb} ${resource}`);
  }

  allow(verb: Verb, resource: string): void {
    this.#handler.forbidden.delete(`${verb} ${resource}`);
  }

  async setUnavailable(down: boolean, how: Unavailability = 'refuse'): Promise<void> {
    if (down) {
      this.#handler.down = how;
      this.breakWatches();
      if (how === 'refuse') await this.#closeListener();
      return;
    }
    this.#handler.down = undefined;
    if (!this.#listening && !this.#stopped) {
      await new Promise<void>((resolveListen, reject) => {
        this.#server.once('error', reject);
        this.#server.listen(this.#port, '127.0.0.1', () => {
          this.#server.off('error', reject);
          resolveListen();
        });
      });
      this.#listening = true;
    }
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#crds.stop();
    this.breakWatches();
    await this.#closeListener();
    removeDir(this.#dir);
  }

  async #closeListener(): Promise<void> {
    if (!this.#listening) return;
    this.#listening = false;
    const closed = new Promise<void>((resolveClose) => this.#server.close(() => resolveClose()));
    this.cutConnections();
    await closed;
  }
}

/** How long the server keeps an idle connection open, as kube-apiserver does. */
export const KEEP_ALIVE_TIMEOUT_MS = 90_000;

/** Starts a fake API server on an ephemeral port of 127.0.0.1 with a fresh CA; call `stop()` when done. */
export async function startFakeKubeApi(options: FakeKubeApiOptions = {}): Promise<FakeKubeApi> {
  const dir = tempDir('warren-kube-api-');
  try {
    const certificate = issueServerCertificate(dir);
    const tls = { key: certificate.keyPem, cert: certificate.certPem };
    let server: Server;
    // A Go server holds no cap like Node's 10 MB a session (answers queued for a slow reader count).
    if (options.http2 === true) server = createSecureServer({ ...tls, allowHTTP1: true, maxSessionMemory: 256 });
    else {
      const https = createServer(tls);
      // A real kube-apiserver keeps an idle connection 90 s (its http.Server IdleTimeout), not Node's 5 s:
      // clients reuse connections across pauses that long, and tests see what they would.
      https.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
      server = https;
    }
    await new Promise<void>((resolveListen, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolveListen();
      });
    });
    const port = (server.address() as AddressInfo).port;
    return new FakeKubeApiServer(server, port, dir, certificate.caPem, {
      ...options,
      token: options.token ?? randomBytes(16).toString('hex'),
    });
  } catch (error) {
    removeDir(dir);
    throw error;
  }
}
