/**
 * A fake Kubernetes API server for tests, in process, speaking the real wire protocol: HTTP/1.1 over
 * TLS on 127.0.0.1 (a fresh CA per run), bearer-token auth, JSON bodies, `Status` errors, and
 * watches as chunked streams of newline-separated `{"type","object"}` events — as observed from a
 * real API server (kube-apiserver 1.23, recorded in the project's notes on the Kubernetes API).
 *
 * It serves:
 * - core/v1 pods and nodes (get, list, watch; tests create, update and delete them through the
 *   handle) and events (get, list, watch, create, patch);
 * - CustomResourceDefinitions (apiextensions.k8s.io/v1: create, get, list, watch), registered from
 *   the options (`crds: 'deploy'` loads deploy/crds/) or created over the API and established
 *   shortly after; and the custom resources they define, cluster-scoped or namespaced, with the
 *   status subresource: create, get, list, watch, update, merge and JSON patch, delete,
 *   deletecollection — pruning, schema and name validation, resourceVersion guards, generation,
 *   finalizers, label and field selectors, limit/continue paging, the size limits of etcd;
 * - Leases (coordination.k8s.io/v1), guarded like any object, MicroTime checked.
 * Tests inject faults: the API server's etcd restored from an older snapshot (`snapshot`, then
 * `restoreSnapshot`: objects made since gone, the resourceVersion back at the snapshot's or bumped
 * past it, watches ended and resumed ones answered 410 Gone, so clients relist), expired resource versions, broken or ended watch streams, RBAC refusals (on
 * any verb and resource, subresources included), a namespace being deleted, an unreachable server,
 * a per-write latency; and read the requests (records and counts per verb and resource).
 * A harness of many simulated nodes gives each its own kubeconfig (`clientKubeconfig(name)`: a
 * bearer token of its own, accepted as the server's) and reads every request and every watch event
 * delivered by client (`RequestRecord.client`, `watchEvents()`): a real API server tells clients
 * apart by their credentials too (its audit log's user), and the token does it here whatever
 * User-Agent the client sends.
 *
 * Guarantees, as the real server gives them:
 * - One global resourceVersion, a string of an increasing integer; every change gets the next one.
 * - A watch from RV delivers every later change of its resource once, in RV order, projected
 *   through its selectors (entering: ADDED; leaving: DELETED at the new RV). A watch without RV
 *   (or "0") first gets an ADDED for each object present.
 * - A watch from an RV older than the last `compactHistory()` gets 410 Expired, as the HTTP status
 *   or as an ERROR event carrying a Status (option `expiredAs`, default the event).
 * - BOOKMARKs only with `allowWatchBookmarks=true`: when a test calls `bookmark()`; for custom
 *   resources and Leases also every 60 s and 1.5 s before `timeoutSeconds` ends the stream.
 *
 * Where it is stricter or smaller than the real server, it says so loudly instead of answering
 * wrongly: verbs it does not serve get 405 (CRD update and delete among them); server-side apply
 * (`application/apply-patch+yaml`) gets 415 naming the fake; query parameters whose meaning it
 * does not implement (`dryRun`, `sendInitialEvents`; on core resources also `continue` and
 * `resourceVersionMatch`; `resourceVersionMatch=Exact` anywhere) get 400; schema keywords it does
 * not implement (CEL, oneOf/anyOf/allOf/not, defaults, formats, list and map types) refuse the CRD.
 * Every namespace exists (no 404 for a missing one). Replies are always compact (no pretty-printing
 * for curl or `?pretty`). Core lists ignore `limit` (the whole list, no continue token, which a real
 * server may also do). managedFields are recomputed per manager from the object, not merged field
 * by field. Discovery is served only for the group versions of CRDs (`/apis/<group>/<version>`,
 * without shortNames and storage version hashes); Table output (`as=Table`), other discovery
 * documents and protobuf are not served. CRD update and delete are not served (405), so watches are
 * never ended by a CRD change. It requires of an Event what Warren promises to send, which core/v1
 * itself does not all demand.
 * Unknown paths under a group that is not built in (or whose CRD is not yet established) get the
 * real text/plain `404 page not found`; built-in APIs the fake does not serve get a JSON 404.
 *
 * The implementation is split by concept under fake-kube-api/: server (dispatch), objects
 * (storage, RVs, history), core, crds and registry, writes, lists, watch, selectors, schema,
 * metadata, leases, patch, status (errors), http.
 */
export { startFakeKubeApi } from './fake-kube-api/fake-api.ts';
export type {
  ConnectionCounts,
  CrdObject,
  DeliveredEvents,
  ExpiredAs,
  FakeKubeApi,
  FakeKubeApiOptions,
  FakeSnapshot,
  KubeObject,
  KubeStatus,
  ObjectMeta,
  RequestRecord,
  Resource,
  StatusCause,
  Unavailability,
  Verb,
  WatchEventType,
} from './fake-kube-api/types.ts';
