/**
 * The cluster store: etcd v3 through the etcd3 client (gRPC). Several agents share it, each a node.
 *
 * Layout under the key prefix (default `/warren/`):
 *   units/<pool>                          one JSON document per pool (in cluster mode, per block):
 *                                         affinity, cursor, description, cooldown, allocated
 *                                         addresses with their owners, resting addresses
 *   owners/<network>/<cid>/<ifname>/<range pool>
 *                                         the full allocation record, one per owner and range
 *   nodes/<node>                          an agent's announcement, attached to its lease
 *   tasks/<task>                          a cluster chore claimed by one node, attached to its lease
 * (path segments are percent-encoded, so a `/` in a name cannot escape its place).
 *
 * A pool's revision is the etcd mod_revision of its document. A commit is one etcd transaction:
 * the document's mod_revision must still be the expected one and every owner key being created
 * must not exist; then the document and the owner keys are written together. So two nodes can
 * never both commit on the same picture of a block, and one owner can never hold two addresses in
 * one range, even when its ADD is retried on another node. A commit whose answer was lost and is
 * retried fails its comparison and reads as a conflict; the allocator then finds the allocation
 * it made and returns it.
 *
 * Any failure to reach etcd surfaces as WarrenError TRY_AGAIN (CNI code 11) naming etcd.
 */
import { readFileSync } from 'node:fs';
import { WarrenError, messageOf } from '../core/errors.ts';
import { isPlainObject } from '../core/validate.ts';
import type { Allocation, Owner } from '../ipam/allocation.ts';
import { inRangePool, rangePoolOfKey } from '../ipam/blocks.ts';
import {
  type AllocationFilter,
  type CommitResult,
  type Membership,
  type NodeRecord,
  type PoolDescription,
  type PoolOp,
  type PoolRead,
  type PoolSummary,
  type Revision,
  type Store,
  isEtcdEndpoint,
} from './store.ts';
import type { Etcd3, Lease, Namespace } from 'etcd3';

export interface EtcdStoreOptions {
  /** Client URLs, `http://host:port` or `https://host:port`. */
  readonly endpoints: readonly string[];
  /** Key prefix; every key Warren writes lives under it. Default `/warren/`. */
  readonly prefix?: string;
  /** PEM files for TLS: CA to trust, and a client certificate and key for mutual TLS. */
  readonly tls?: { readonly ca?: string; readonly cert?: string; readonly key?: string };
  /** Deadline of each call, milliseconds. Default 2000. */
  readonly callTimeoutMs?: number;
  /** Lifetime of a node's announcement when its agent stops renewing it, seconds. Default 10. */
  readonly leaseSeconds?: number;
}

interface UnitDoc {
  affinity?: string;
  cursor?: string;
  description?: PoolDescription;
  /**
   * The pool's cooldown attribute. Documents written before it existed have only the copy inside
   * `description`, which stands in for it until the pool's metadata is next written.
   */
  cooldownSeconds?: number;
  /** address → owner [network, containerID, ifname] */
  allocations: Record<string, [string, string, string]>;
  /** address → reusable at (ms since epoch) */
  resting: Record<string, number>;
}

const enc = encodeURIComponent;

/** Where an owner's record in a range pool lives in etcd: a key layout (identity is ipam's ownerKey). */
function ownerRecordKey(network: string, containerID: string, ifname: string, pool: string): string {
  return `owners/${enc(network)}/${enc(containerID)}/${enc(ifname)}/${enc(rangePoolOfKey(pool))}`;
}

function emptyDoc(): UnitDoc {
  return { allocations: {}, resting: {} };
}

function parseDoc(pool: string, value: Buffer | undefined): UnitDoc {
  if (value === undefined || value.length === 0) return emptyDoc();
  try {
    const doc = JSON.parse(value.toString('utf8')) as UnitDoc;
    if (!isPlainObject(doc) || typeof doc.allocations !== 'object' || typeof doc.resting !== 'object') throw new Error('not a pool document');
    return doc;
  } catch (error) {
    throw new WarrenError('IO_FAILURE', `etcd document of pool ${pool} is corrupt: ${messageOf(error)}`);
  }
}

export class EtcdStore implements Store {
  readonly description: string;
  readonly membership: Membership;
  readonly #client: Etcd3;
  readonly #ns: Namespace;
  readonly #timeout: number;
  readonly #leaseSeconds: number;
  /** The last document seen per pool, so a commit on a fresh read needs one round trip. */
  readonly #docs = new Map<string, { revision: number; doc: UnitDoc }>();
  #lease: Lease | undefined;
  #announced: { node: string; since: number; version: string } | undefined;

  /** Opens a client (lazily loading etcd3, so the SQLite path never pays for gRPC). */
  static async open(options: EtcdStoreOptions): Promise<EtcdStore> {
    if (options.endpoints.length === 0) throw new WarrenError('INVALID_CONFIG', 'etcd store: no endpoints given');
    for (const url of options.endpoints) {
      if (!isEtcdEndpoint(url)) throw new WarrenError('INVALID_CONFIG', `etcd endpoint "${url}" is not http://host:port or https://host:port`);
    }
    const { Etcd3: Client, isRecoverableError } = await import('etcd3');
    // Cockatiel's backoff is named like core/backoff.ts's and is not the same thing: aliased.
    const { ConsecutiveBreaker, ExponentialBackoff: CockatielExponentialBackoff, circuitBreaker, handleWhen, retry } = await import('cockatiel');
    const read = (what: string, path: string | undefined): Buffer | undefined => {
      if (path === undefined) return undefined;
      try {
        return readFileSync(path);
      } catch (error) {
        throw new WarrenError('INVALID_CONFIG', `etcd ${what} ${path} cannot be read: ${messageOf(error)}`);
      }
    };
    const ca = read('CA file', options.tls?.ca);
    const cert = read('client certificate', options.tls?.cert);
    const key = read('client key', options.tls?.key);
    if ((cert === undefined) !== (key === undefined)) throw new WarrenError('INVALID_CONFIG', 'etcd TLS: a client certificate needs its key, and a key its certificate');
    const timeout = options.callTimeoutMs ?? 2000;
    const client = new Client({
      hosts: [...options.endpoints],
      dialTimeout: timeout,
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + timeout }),
      // A member that fails is skipped for half a second, not the client's default five: during a
      // leader election every member fails for a moment, and a long open breaker on all of them
      // would turn a one-second election into a five-second outage. A failed call is tried again
      // on another member a few times, quickly.
      faultHandling: {
        host: () => circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 500, breaker: new ConsecutiveBreaker(3) }),
        global: retry(handleWhen(isRecoverableError), { maxAttempts: 4, backoff: new CockatielExponentialBackoff({ initialDelay: 50, maxDelay: 400 }) }),
      },
      ...(ca === undefined && cert === undefined
        ? {}
        : { credentials: { rootCertificate: ca ?? Buffer.alloc(0), ...(key === undefined ? {} : { privateKey: key }), ...(cert === undefined ? {} : { certChain: cert }) } }),
    });
    return new EtcdStore(client, options, timeout);
  }

  private constructor(client: Etcd3, options: EtcdStoreOptions, timeout: number) {
    const prefix = options.prefix ?? '/warren/';
    this.description = `etcd:${options.endpoints.join(',')}${prefix}`;
    this.#client = client;
    this.#ns = client.namespace(prefix);
    this.#timeout = timeout;
    this.#leaseSeconds = options.leaseSeconds ?? 10;
    this.membership = {
      announce: (node, info) => this.#announce(node, info),
      liveNodes: () => this.#liveNodes(),
      claimTask: (task) => this.#claimTask(task),
      releaseTask: (task) => this.#releaseTask(task),
      renew: () => this.#renew(),
      withdraw: () => this.#withdraw(),
    };
  }

  /** Runs one etcd call, turning transport failures into TRY_AGAIN that names etcd. */
  async #call<T>(what: string, body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (error) {
      if (error instanceof WarrenError) throw error;
      throw new WarrenError('TRY_AGAIN', `etcd store unreachable (${what}): ${messageOf(error)}`, { cause: error });
    }
  }

  async readPool(pool: string, knownRevision?: Revision): Promise<PoolRead> {
    const response = await this.#call(`read ${pool}`, () => this.#ns.get(`units/${pool}`).exec());
    const kv = response.kvs[0];
    const revision = kv === undefined ? 0 : Number(kv.mod_revision);
    if (knownRevision !== undefined && knownRevision === revision) return { kind: 'unchanged', revision };
    const doc = parseDoc(pool, kv?.value);
    this.#docs.set(pool, { revision, doc });
    const cooldownSeconds = doc.cooldownSeconds ?? doc.description?.cooldownSeconds;
    return {
      kind: 'snapshot',
      pool,
      revision,
      ...(doc.cursor === undefined ? {} : { cursor: doc.cursor }),
      ...(doc.affinity === undefined ? {} : { affinity: doc.affinity }),
      ...(cooldownSeconds === undefined ? {} : { cooldownSeconds }),
      allocations: Object.keys(doc.allocations),
      resting: Object.entries(doc.resting).map(([address, reusableAt]) => ({ address, reusableAt })),
    };
  }

  async commit(pool: string, expected: Revision, ops: readonly PoolOp[]): Promise<CommitResult> {
    let base = this.#docs.get(pool);
    if (base === undefined || base.revision !== expected) {
      const read = await this.readPool(pool);
      if (read.revision !== expected) return { kind: 'conflict', reason: `pool ${pool} is at revision ${read.revision}, not ${expected}` };
      base = this.#docs.get(pool) as { revision: number; doc: UnitDoc };
    }
    const doc: UnitDoc = structuredClone(base.doc);
    const creates = new Map<string, Allocation>();
    const deletes = new Set<string>();
    for (const op of ops) {
      switch (op.op) {
        case 'allocate': {
          const a = op.allocation;
          if (a.pool !== pool) return { kind: 'conflict', reason: `allocation for pool ${a.pool} committed to ${pool}` };
          if (doc.allocations[a.address] !== undefined) return { kind: 'conflict', reason: `${a.address} is already allocated in ${pool}` };
          const key = ownerRecordKey(a.network, a.containerID, a.ifname, pool);
          if (creates.has(key)) return { kind: 'conflict', reason: `container ${a.containerID} (${a.ifname}) already holds an address in ${pool}` };
          doc.allocations[a.address] = [a.network, a.containerID, a.ifname];
          delete doc.resting[a.address];
          creates.set(key, a);
          deletes.delete(key);
          break;
        }
        case 'release': {
          const owner = doc.allocations[op.address];
          if (owner !== undefined) {
            delete doc.allocations[op.address];
            const key = ownerRecordKey(owner[0], owner[1], owner[2], pool);
            if (creates.delete(key) === false) deletes.add(key);
          }
          if (op.reusableAt !== undefined) doc.resting[op.address] = op.reusableAt;
          break;
        }
        case 'unrest':
          delete doc.resting[op.address];
          break;
        case 'cursor':
          doc.cursor = op.address;
          break;
        case 'describe':
          doc.description = op.description;
          break;
        case 'cooldown':
          doc.cooldownSeconds = op.seconds;
          break;
        case 'claim':
          doc.affinity = op.node;
          break;
        case 'unclaim':
          delete doc.affinity;
          break;
        default: {
          const never: never = op;
          throw new Error(`unknown pool op ${JSON.stringify(never)}`);
        }
      }
    }
    const unitKey = `units/${pool}`;
    let txn = this.#ns.if(unitKey, 'Mod', '==', expected);
    for (const key of creates.keys()) txn = txn.and(key, 'Create', '==', 0);
    txn = txn.then(
      this.#ns.put(unitKey).value(JSON.stringify(doc)),
      ...[...creates].map(([key, a]) => this.#ns.put(key).value(JSON.stringify(a))),
      ...[...deletes].map((key) => this.#ns.delete().key(key)),
    );
    const response = await this.#call(`commit ${pool}`, () => txn.commit());
    if (!response.succeeded) {
      this.#docs.delete(pool);
      return { kind: 'conflict', reason: `pool ${pool} changed since revision ${expected}, or an owner already holds an address in it` };
    }
    const revision = Number(response.header.revision);
    this.#docs.set(pool, { revision, doc });
    return { kind: 'committed', revision };
  }

  async findByOwner(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]> {
    const prefix = `owners/${enc(owner.network)}/${enc(owner.containerID)}/${owner.ifname === undefined ? '' : `${enc(owner.ifname)}/`}`;
    return this.#allocationsUnder(prefix);
  }

  async #allocationsUnder(prefix: string): Promise<Allocation[]> {
    const values = await this.#call('list allocations', () => this.#ns.getAll().prefix(prefix).strings());
    const out: Allocation[] = [];
    for (const [key, value] of Object.entries(values)) {
      try {
        out.push(JSON.parse(value) as Allocation);
      } catch (error) {
        throw new WarrenError('IO_FAILURE', `etcd allocation record ${key} is corrupt: ${messageOf(error)}`);
      }
    }
    return out.sort((a, b) => (a.pool < b.pool ? -1 : a.pool > b.pool ? 1 : a.createdAt - b.createdAt || (a.address < b.address ? -1 : 1)));
  }

  async list(filter: AllocationFilter = {}): Promise<Allocation[]> {
    let prefix = 'owners/';
    if (filter.network !== undefined) {
      prefix += `${enc(filter.network)}/`;
      if (filter.containerID !== undefined) prefix += `${enc(filter.containerID)}/`;
    }
    const all = await this.#allocationsUnder(prefix);
    return all.filter(
      (a) =>
        (filter.pool === undefined || a.pool === filter.pool) &&
        (filter.rangePool === undefined || inRangePool(a.pool, filter.rangePool)) &&
        (filter.network === undefined || a.network === filter.network) &&
        (filter.containerID === undefined || a.containerID === filter.containerID) &&
        (filter.ifname === undefined || a.ifname === filter.ifname) &&
        (filter.podNamespace === undefined || a.podNamespace === filter.podNamespace) &&
        (filter.podName === undefined || a.podName === filter.podName) &&
        (filter.podUID === undefined || a.podUID === filter.podUID) &&
        (filter.node === undefined || a.node === filter.node) &&
        (filter.address === undefined || a.address === filter.address),
    );
  }

  async pools(prefix = ''): Promise<PoolSummary[]> {
    const response = await this.#call('list pools', () => this.#ns.getAll().prefix(`units/${prefix}`).exec());
    const out: PoolSummary[] = [];
    for (const kv of response.kvs) {
      const pool = kv.key.toString('utf8').slice('units/'.length); // the namespace strips its prefix
      const doc = parseDoc(pool, kv.value);
      const revision = Number(kv.mod_revision);
      if (!this.#docs.has(pool) || (this.#docs.get(pool)?.revision ?? 0) < revision) this.#docs.set(pool, { revision, doc });
      out.push({
        pool,
        revision,
        allocated: Object.keys(doc.allocations).length,
        resting: Object.keys(doc.resting).length,
        ...(doc.description === undefined ? {} : { description: doc.description }),
        ...(doc.affinity === undefined ? {} : { affinity: doc.affinity }),
      });
    }
    return out.sort((a, b) => (a.pool < b.pool ? -1 : a.pool > b.pool ? 1 : 0));
  }

  async ping(): Promise<void> {
    // A linearizable read: answered only by a member that has a quorum behind it.
    await this.#call('ping', () => this.#ns.get('nodes/').options({ deadline: Date.now() + Math.min(this.#timeout, 1000) }).exec());
  }

  async #announce(node: string, info: { since: number; version: string }): Promise<void> {
    this.#announced = { node, ...info };
    await this.#grant();
  }

  /** (Re)creates the lease and the node key; called at announce and whenever the lease was lost. */
  async #grant(): Promise<void> {
    const announced = this.#announced;
    if (announced === undefined) return;
    const lease = this.#ns.lease(this.#leaseSeconds);
    this.#lease = lease;
    lease.on('lost', () => {
      if (this.#lease === lease) this.#lease = undefined;
    });
    await this.#call('announce node', () => lease.put(`nodes/${enc(announced.node)}`).value(JSON.stringify(announced)).exec());
  }

  /** Re-announces after a lost lease (etcd was away longer than the lease). Cheap when all is well. */
  async #renew(): Promise<void> {
    if (this.#announced !== undefined && (this.#lease === undefined || this.#lease.revoked())) await this.#grant();
  }

  async #claimTask(task: string): Promise<boolean> {
    const lease = this.#lease;
    const announced = this.#announced;
    if (lease === undefined || announced === undefined) return false;
    const id = await this.#call('claim a task', () => lease.grant());
    const key = `tasks/${task.split('/').map(enc).join('/')}`;
    const claim = JSON.stringify({ node: announced.node, at: Date.now() });
    const result = await this.#call('claim a task', () => this.#ns.if(key, 'Create', '==', 0).then(this.#ns.put(key).value(claim).lease(id)).commit());
    return result.succeeded;
  }

  async #releaseTask(task: string): Promise<void> {
    await this.#call('release a task', () => this.#ns.delete().key(`tasks/${task.split('/').map(enc).join('/')}`).exec());
  }

  async #liveNodes(): Promise<NodeRecord[]> {
    const values = await this.#call('list nodes', () => this.#ns.getAll().prefix('nodes/').strings());
    const out: NodeRecord[] = [];
    for (const value of Object.values(values)) {
      try {
        const record = JSON.parse(value) as NodeRecord;
        if (typeof record.node === 'string') out.push(record);
      } catch {
        // A node key Warren did not write: not a node.
      }
    }
    return out.sort((a, b) => (a.node < b.node ? -1 : 1));
  }

  async #withdraw(): Promise<void> {
    const lease = this.#lease;
    this.#announced = undefined;
    this.#lease = undefined;
    if (lease !== undefined) await lease.revoke().catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.#withdraw();
    this.#client.close();
  }
}
