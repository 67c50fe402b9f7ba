/**
 * The public shapes of the fake Kubernetes API (test/helpers/fake-kube-api.ts re-exports them): the
 * objects as they travel on the wire, the Status errors, the options and the handle a test drives.
 */

/** The core resources the fake serves (group ""); custom resources and Leases are named by plural. */
export type Resource = 'pods' | 'nodes' | 'events' | 'namespaces';
export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';
export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
/** How a too-old resourceVersion is refused: HTTP 410, or 200 and an ERROR event with a 410 Status. */
export type ExpiredAs = 'status' | 'event';
/** How the server is away: the port refuses connections, or every request gets 503. */
export type Unavailability = 'refuse' | '503';

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string | undefined;
  resourceVersion?: string;
  creationTimestamp?: string | undefined;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [field: string]: unknown;
}

/** Any object as it travels on the wire (JSON; timestamps are RFC 3339 strings). */
export interface KubeObject {
  apiVersion?: string | undefined;
  kind?: string | undefined;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface StatusCause {
  reason?: string;
  message: string;
  field?: string;
}

export interface KubeStatus {
  kind: 'Status';
  apiVersion: 'v1';
  /** Empty, except `continue` on a 410 for an expired continue token. */
  metadata: { continue?: string };
  status: 'Failure';
  message: string;
  /** Absent on the 500s that carry none (etcd errors, an RV in a create body). */
  reason?: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    causes?: StatusCause[];
    retryAfterSeconds?: number;
  };
  code: number;
}

export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  /** The Kubernetes verb, when the path names a served resource and the method maps to one. */
  readonly verb: Verb | undefined;
  /** The resource (plural), with `/status` for the status subresource. */
  readonly resource: string | undefined;
  readonly contentType: string | undefined;
  /** The User-Agent header sent, which names the client (Warren's: `warren/<version> (node <name>)`). */
  readonly userAgent: string | undefined;
  /**
   * Which client sent it: the name a kubeconfig of `clientKubeconfig(name)` identifies (its bearer
   * token is that client's own); undefined for the server's one token (and for a refused token).
   */
  readonly client: string | undefined;
  /** The HTTP status answered (0 while a request body is still being read). */
  status: number;
}

/** How many watch events of one type went to one client's watches of one resource. */
export interface DeliveredEvents {
  readonly resource: string;
  readonly client: string | undefined;
  readonly type: WatchEventType;
  count: number;
}

/** A CustomResourceDefinition (apiextensions.k8s.io/v1) as written in YAML or JSON. */
export type CrdObject = KubeObject;

export interface FakeKubeApiOptions {
  /** The bearer token accepted; default random. */
  readonly token?: string;
  /** The user named in 403 messages; default Warren's service account. */
  readonly user?: string;
  /** How a too-old RV is refused unless a test says otherwise per watch; default 'event'. */
  readonly expiredAs?: ExpiredAs;
  /** Wall clock for timestamps (creation, deletion); default the real one. */
  readonly now?: () => Date;
  /**
   * CRDs registered (and established) before the server answers: 'deploy' loads every
   * deploy/crds/*.yaml of the repository; or a list of CRD objects.
   */
  readonly crds?: 'deploy' | readonly CrdObject[];
  /** Milliseconds each create, update, patch and delete waits before it is applied; default 0. */
  readonly writeLatencyMs?: number;
  /**
   * Milliseconds from a CRD's creation over the API to NamesAccepted (then Established); default 20.
   * `Infinity`: only when the test calls `establishCrds()`.
   */
  readonly crdEstablishMs?: number;
  /**
   * Offer HTTP/2 by ALPN beside HTTP/1.1, as a kube-apiserver does (an HTTP/2 client multiplexes
   * every request and watch over one connection); default false: HTTP/1.1 only.
   */
  readonly http2?: boolean;
}

/** The TLS connections clients made to the fake. */
export interface ConnectionCounts {
  /** Open now. */
  readonly open: number;
  /** Accepted since the fake started. */
  readonly accepted: number;
  /** HTTP/2 sessions open now (0 when the fake serves HTTP/1.1 only). */
  readonly http2Sessions: number;
}

/** A copy of the fake's storage (`FakeKubeApi.snapshot`), opaque to tests. */
export interface FakeSnapshot {
  readonly rv: number;
}

export interface FakeKubeApi {
  /** `https://127.0.0.1:PORT`. */
  readonly url: string;
  /** A kubeconfig (JSON, which is YAML) with the URL, the CA and the token. */
  readonly kubeconfigPath: string;
  readonly token: string;
  readonly caPem: string;
  /** Every request that reached the server, in arrival order. */
  readonly requests: readonly RequestRecord[];
  /** Forgets the recorded requests and the counts. */
  clearRequests(): void;
  /**
   * Requests per verb and resource since the start or the last `clearRequests()`, keyed
   * `"<verb> <resource>"` (e.g. `"create warrenblocks"`, `"patch warrenblocks/status"`); requests
   * that named no served resource are counted under `"other"`.
   */
  requestCounts(): Record<string, number>;
  /** Writes another kubeconfig for this server, e.g. with a wrong token; returns its path. */
  writeKubeconfig(options?: { token?: string }): string;
  /**
   * A kubeconfig for client `name` (a simulated node of a scale harness): its bearer token is its
   * own, accepted as the server's, so every request and watch event is attributed to `name`
   * (`RequestRecord.client`, `watchEvents()`). The same name gives the same token; returns its path.
   */
  clientKubeconfig(name: string): string;
  /**
   * Watch events written to watch streams since the start or the last `clearRequests()`, by
   * resource (plural), watching client (undefined: the server's one token) and event type, in
   * first-seen order. Events a stream never got (ended, destroyed) are not counted.
   */
  watchEvents(): readonly DeliveredEvents[];
  /** The current global resourceVersion. */
  resourceVersion(): string;
  /** Open watch streams, optionally of one resource (plural). */
  watchCount(resource?: string): number;
  /** The TLS connections clients made: open now, and accepted since the start. */
  connectionCounts(): ConnectionCounts;

  createPod(pod: KubeObject): KubeObject;
  getPod(namespace: string, name: string): KubeObject | undefined;
  /** Applies `change` to a copy of the pod and stores it (MODIFIED). */
  updatePod(namespace: string, name: string, change: (pod: KubeObject) => void): KubeObject;
  setPodPhase(namespace: string, name: string, phase: string): KubeObject;
  /**
   * Deletes as the API server does. A pod bound to a node and still running is only marked
   * (deletionTimestamp, MODIFIED) until the kubelet's final delete — the next `deletePod` — removes
   * it (DELETED). An unbound or finished pod, or `force` (grace period 0), is removed at once.
   */
  deletePod(namespace: string, name: string, options?: { force?: boolean }): void;
  createNode(node: KubeObject | string): KubeObject;
  updateNode(name: string, change: (node: KubeObject) => void): KubeObject;
  /** A Namespace as the real server keeps one (its `kubernetes.io/metadata.name` label, phase Active). */
  createNamespace(
    name: string,
    meta?: { labels?: Record<string, string>; annotations?: Record<string, string> },
  ): KubeObject;
  updateNamespace(name: string, change: (namespace: KubeObject) => void): KubeObject;
  deleteNode(name: string): void;
  /** Events posted by clients (core/v1), optionally of one namespace. */
  listEvents(namespace?: string): KubeObject[];

  /** Registers a CRD as established at once (no API request, no delay). */
  registerCrd(crd: CrdObject): void;
  /** Establishes now every CRD created over the API and not yet established. */
  establishCrds(): void;
  /**
   * Writes objects of a served resource (a CR plural or `leases`) straight into storage: no
   * validation, no pruning, no watch events, no history; each gets a uid, creationTimestamp, its
   * own resourceVersion and (CRs) generation 1 where missing. For bulk preloads of a benchmark: a
   * custom resource is stored as a key-sorted copy (its wire form), a Lease as the object given.
   */
  preload(plural: string, objects: Iterable<KubeObject>): void;
  /** A copy of one stored object of a served resource, or undefined. */
  object(plural: string, name: string, namespace?: string): KubeObject | undefined;
  /** Copies of every stored object of a resource, in key (namespace/name) order. */
  objects(plural: string): KubeObject[];
  /**
   * Removes a stored object at once, finalizers or not, as someone else's delete would (watchers see
   * DELETED at a new RV); false when there is none.
   */
  deleteObject(plural: string, name: string, namespace?: string): boolean;
  /**
   * Changes a stored object as someone else's edit would (`kubectl edit`: watchers see MODIFIED at a
   * new RV; no validation); false when there is none.
   */
  editObject(plural: string, name: string, change: (object: KubeObject) => void, namespace?: string): boolean;
  /** Changes the latency applied to each write from now on. */
  setWriteLatency(ms: number): void;
  /**
   * Holds the answer to the next create of `plural` once the object is stored (`applied` resolves
   * then) until `release()`: a client killed in between made the write and never learnt it.
   */
  holdNextCreate(plural: string): { readonly applied: Promise<void>; readonly release: () => void };

  /**
   * What the API server's etcd holds now, as `etcdctl snapshot save` takes it, for
   * `restoreSnapshot`.
   */
  snapshot(): FakeSnapshot;
  /**
   * The API server's etcd restored from `snapshot` and the apiserver restarted over it, as the
   * disaster-recovery procedure does: every object as it was at the snapshot (objects created since
   * are gone, deleted ones back, changed ones at their old state and RV), the global resourceVersion
   * back at the snapshot's (plus `bumpRevision`, as `etcdutl snapshot restore --bump-revision`
   * adds), open watches ended (the apiserver restarted), and no history before that RV: a watch
   * resumed from an older RV, or a continue token, gets 410 Expired (a relist); one from a later RV
   * (the lost future, when not bumped) waits, silent, until the store passes it. CRDs stay served.
   */
  restoreSnapshot(snapshot: FakeSnapshot, options?: { bumpRevision?: number }): void;
  /** Forgets the change history: a watch from any RV before now gets 410 Expired. */
  compactHistory(): void;
  /** The next watch request (whatever its RV) gets 410 Expired, as `as` says. Calls queue up. */
  expireNextWatch(as?: ExpiredAs): void;
  /** Sends a BOOKMARK at the current RV to every watch that allowed bookmarks. */
  bookmark(): void;
  /** Cuts every open watch stream mid-stream (the socket dies without the chunked terminator). */
  breakWatches(): void;
  /** Ends every open watch stream cleanly, as the server does when a watch times out. */
  endWatches(): void;
  /**
   * Cuts every client connection (TLS) at once, as a restarted load balancer in front of the API
   * server does: every request in flight and every watch on them is cut off.
   */
  cutConnections(): void;
  /**
   * Sends GOAWAY (NO_ERROR) on every HTTP/2 session, naming the last stream it began, as an API
   * server shutting down gracefully does: streams open finish (a request in flight is answered, a
   * watch goes on), new ones must go to a new connection. HTTP/1.1 connections are untouched.
   */
  goAway(): void;
  /**
   * Marks a namespace as being deleted: every create in it is refused as the API server's
   * NamespaceLifecycle admission refuses it (403 Forbidden with the cause `NamespaceTerminating`).
   */
  terminateNamespace(namespace: string): void;
  /**
   * Refuses `verb` on `resource` (a plural, `<plural>/status` for the status subresource) with 403
   * Forbidden, as RBAC would, until `allow`. Checked before anything else, as RBAC is.
   */
  forbid(verb: Verb, resource: string): void;
  allow(verb: Verb, resource: string): void;
  /**
   * Takes the server away (open watches are cut) or brings it back. 'refuse' closes the listening
   * socket, so clients see ECONNREFUSED, as while an apiserver restarts; '503' keeps accepting and
   * answers 503 ServiceUnavailable, as a load balancer in front of a down apiserver can.
   */
  setUnavailable(down: boolean, how?: Unavailability): Promise<void>;
  /** Closes every connection and the listener, and removes the certificates and kubeconfig. */
  stop(): Promise<void>;
}
