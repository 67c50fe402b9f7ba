/**
 * The cluster store: etcd v3 through the etcd3 client (gRPC; the connection, its deadlines and
 * retries: etcd-client.ts). Several agents share it, each a node.
 *
 * Layout under the key prefix (default `/warren/`; documents and owner records: etcd-documents.ts):
 *   units/<pool>                          one JSON document per pool (in cluster mode, per block):
 *                                         affinity, cursor, description, cooldown, allocated
 *                                         addresses with their owners, resting addresses
 *   owners/<network>/<cid>/<ifname>/<range pool>
 *                                         the full allocation record, one per owner and range
 *   nodes/<node>                          an agent's announcement, attached to its lease
 *   tasks/<task>                          a cluster chore claimed by one node, attached to its lease
 *                                         (these two: etcd-membership.ts)
 *   spaces/<address space>/<range pool>   the admission record of a range in its address space
 *                                         (network_name and family)
 *   identity                              the store's identity: a random id written once, when the
 *                                         first agent finds none, and never deleted by Warren
 * (path segments are percent-encoded, so a `/` in a name cannot escape its place).
 *
 * A pool's revision is the etcd mod_revision of its document. A commit is one etcd transaction:
 * the document's mod_revision must still be the expected one and every owner key being created
 * must not exist; then the document and the owner keys are written together (what the ops make of
 * the document and the owner keys is worked out first: etcd-pool-ops.ts). So two nodes can
 * never both commit on the same picture of a block, and one owner can never hold two addresses in
 * one range, even when its ADD is retried on another node. A commit whose answer was lost and is
 * retried fails its comparison and reads as a conflict; the allocator then finds the allocation
 * it made and returns it.
 *
 * Address spaces (etcd-spaces.ts): each agent admits a range on its own and caches that, so the
 * admission is a record in etcd, and an allocation commit carries its range's admission as a guard:
 * one more compare, that the record still exists. Nobody writes that key during ADDs, so the guard
 * adds no hot key; a commit whose range was retired by another agent's admission since is a
 * conflict that says so (`admissionLost`).
 *
 * A store that lost its data (etcd-continuity.ts) is never written again until an operator says so:
 * every response is checked against what was seen (revision, cluster), and once this process
 * knows the store's identity (at its node's announcement), every commit also compares that the
 * identity record is unchanged, so no allocation can apply to a wiped or replaced store even before
 * anything else noticed. While halted, commits and admissions fail with TRY_AGAIN naming why.
 *
 * Any failure to reach etcd surfaces as WarrenError TRY_AGAIN (CNI code 11) naming etcd.
 */
import { WarrenError, messageOf } from '../core/errors.ts';
import type { Allocation, Owner } from '../ipam/allocation.ts';
import { inRangePool, rangePoolOfKey } from '../ipam/blocks.ts';
import { type EtcdClientOptions, openEtcdClient } from './etcd-client.ts';
import { EtcdContinuity } from './etcd-continuity.ts';
import { EtcdHistory } from './etcd-history.ts';
import { type UnitDoc, parseDoc } from './etcd-documents.ts';
import { applyOps } from './etcd-pool-ops.ts';
import { IDENTITY_KEY, verifyIdentity } from './etcd-identity.ts';
import { EtcdMembership } from './etcd-membership.ts';
import { type SeenPool, republish } from './etcd-republish.ts';
import { EtcdSpaces, admissionKey } from './etcd-spaces.ts';
import type {
  AddressSpaces,
  AcceptReport,
  AdmissionGuard,
  AllocationFilter,
  CommitResult,
  Membership,
  PoolOp,
  PoolRead,
  PoolSummary,
  Revision,
  Store,
  StoreHistory,
} from './store.ts';
import type { Etcd3, Namespace } from 'etcd3';

/** Where etcd is and how to reach it (etcd-client.ts), and what this store keeps there. */
export interface EtcdStoreOptions extends EtcdClientOptions {
  /** Key prefix; every key Warren writes lives under it. Default `/warren/`. */
  readonly prefix?: string;
  /** Lifetime of a node's announcement when its agent stops renewing it, seconds. Default 10. */
  readonly leaseSeconds?: number;
  /**
   * The store's identity this agent recorded when it last ran (its state directory): a store
   * found without it, or with another, lost its data while the agent was away, and is not written.
   */
  readonly identity?: string;
  /** Told what an operator should know while announcing (waiting out a lease). */
  readonly notice?: (message: string) => void;
  /** Least time between two readings of etcd's history and room (etcd-history.ts), ms. Default 60000. */
  readonly historyIntervalMs?: number;
}

const enc = encodeURIComponent;

export class EtcdStore implements Store {
  readonly description: string;
  readonly membership: Membership;
  readonly spaces: AddressSpaces;
  readonly history: StoreHistory;
  readonly #client: Etcd3;
  readonly #ns: Namespace;
  readonly #timeout: number;
  readonly #membership: EtcdMembership;
  /** What has been seen of etcd, and the halt when the store is no longer the one it was. */
  readonly #continuity = new EtcdContinuity();
  /** The identity recorded at the agent's last run; checked at the first verification. */
  #expectedIdentity: string | undefined;
  readonly #prefix: string;
  /**
   * The last document seen per pool, so a commit on a fresh read needs one round trip; and, with
   * `#records`, what is written back if the store loses its data (etcd-republish.ts). Neither is
   * updated from a store this process stopped trusting.
   */
  readonly #docs = new Map<string, { revision: number; doc: UnitDoc }>();
  /** Allocation records this process wrote or looked up by owner, by `pool|address`. */
  readonly #records = new Map<string, Allocation>();

  /** Opens a client (etcd-client.ts: lazily loading etcd3, so the SQLite path never pays for gRPC). */
  static async open(options: EtcdStoreOptions): Promise<EtcdStore> {
    const { client, timeout } = await openEtcdClient(options);
    return new EtcdStore(client, options, timeout);
  }

  private constructor(client: Etcd3, options: EtcdStoreOptions, timeout: number) {
    const prefix = options.prefix ?? '/warren/';
    this.description = `etcd:${options.endpoints.join(',')}${prefix}`;
    this.#client = client;
    this.#ns = client.namespace(prefix);
    this.#timeout = timeout;
    this.#prefix = prefix;
    this.#expectedIdentity = options.identity;
    this.#membership = new EtcdMembership({
      ns: this.#ns,
      leaseSeconds: options.leaseSeconds ?? 10,
      call: (what, body) => this.#call(what, body),
      continuity: this.#continuity,
      verifyIdentity: () => this.#verifyIdentity(),
      republish: (node) => this.#republish(node),
      notice: options.notice,
    });
    this.membership = this.#membership;
    this.history = new EtcdHistory(client, this.#ns, { ...options, timeout }, (w, b) => this.#call(w, b));
    this.spaces = new EtcdSpaces({
      kv: client.kv,
      prefix,
      call: (what, body) => this.#call(what, body),
      writable: () => this.#refuseWhileHalted(),
      heldIn: (pool, value) => {
        const doc = parseDoc(pool, value);
        return Object.keys(doc.allocations).length + Object.keys(doc.resting).length;
      },
    });
  }

  /** Reads the identity record, and halts when it is not the one known (etcd-identity.ts). */
  async #verifyIdentity(): Promise<void> {
    await verifyIdentity({
      ns: this.#ns,
      call: (what, body) => this.#call(what, body),
      continuity: this.#continuity,
      where: `etcd store ${this.description}`,
      key: `${this.#prefix}${IDENTITY_KEY}`,
      expected: this.#expectedIdentity,
    });
    // Compared once: from now on what this process verified counts, or the operator's accept.
    this.#expectedIdentity = undefined;
  }

  /**
   * Runs one etcd call, turning transport failures into TRY_AGAIN that names etcd, and checks the
   * response's header against what was seen before the call left (etcd-continuity.ts).
   */
  async #call<T>(what: string, body: () => Promise<T>): Promise<T> {
    return this.#continuity.call('etcd store', what, body);
  }

  #refuseWhileHalted(): void {
    const halt = this.#continuity.halted();
    if (halt !== undefined) throw new WarrenError('TRY_AGAIN', halt.message);
  }

  async readPool(pool: string, knownRevision?: Revision): Promise<PoolRead> {
    const response = await this.#call(`read ${pool}`, () => this.#ns.get(`units/${pool}`).exec());
    const kv = response.kvs[0];
    const revision = kv === undefined ? 0 : Number(kv.mod_revision);
    if (knownRevision !== undefined && knownRevision === revision) return { kind: 'unchanged', revision };
    const doc = parseDoc(pool, kv?.value);
    if (this.#continuity.halted() === undefined) this.#docs.set(pool, { revision, doc });
    const cooldownSeconds = doc.cooldownSeconds ?? doc.description?.cooldownSeconds;
    return {
      kind: 'snapshot',
      pool,
      revision,
      ...(doc.cursor === undefined ? {} : { cursor: doc.cursor }),
      ...(doc.affinity === undefined ? {} : { affinity: doc.affinity }),
      ...(cooldownSeconds === undefined ? {} : { cooldownSeconds }),
      allocations: Object.keys(doc.allocations),
      resting: Object.entries(doc.resting).map(([address, reusableAt]) => {
        const stamp = doc.restStamps?.[address];
        return Array.isArray(stamp) &&
          stamp[0] === reusableAt &&
          typeof stamp[1] === 'string' &&
          typeof stamp[2] === 'number'
          ? { address, reusableAt, reusableStamp: { boot: stamp[1], at: stamp[2] } }
          : { address, reusableAt };
      }),
    };
  }

  async commit(
    pool: string,
    expected: Revision,
    ops: readonly PoolOp[],
    guard?: AdmissionGuard,
  ): Promise<CommitResult> {
    if (guard !== undefined && guard.rangePool !== rangePoolOfKey(pool))
      throw new Error(`commit to ${pool} guarded by the admission of ${guard.rangePool}`);
    this.#refuseWhileHalted();
    let base = this.#docs.get(pool);
    if (base === undefined || base.revision !== expected) {
      const read = await this.readPool(pool);
      if (read.revision !== expected)
        return { kind: 'conflict', reason: `pool ${pool} is at revision ${read.revision}, not ${expected}` };
      this.#refuseWhileHalted();
      base = this.#docs.get(pool) as { revision: number; doc: UnitDoc };
    }
    const edit = applyOps(pool, base.doc, ops);
    if (edit.kind === 'conflict') return edit;
    const { doc, creates, deletes, relocations } = edit;
    const unitKey = `units/${pool}`;
    let txn = this.#ns.if(unitKey, 'Mod', '==', expected);
    for (const key of creates.keys()) txn = txn.and(key, 'Create', '==', 0);
    // The guard reads a key nobody writes during ADDs; on failure the record is fetched, to tell a
    // retired admission from a pool that moved.
    const admitted = guard === undefined ? undefined : admissionKey(guard);
    if (admitted !== undefined) txn = txn.and(admitted, 'Version', '>', 0);
    // Never a commit into a store that is not the one whose identity this process verified.
    const identity = this.#continuity.identity;
    if (identity !== undefined) txn = txn.and(IDENTITY_KEY, 'Value', '==', identity);
    txn = txn.then(
      this.#ns.put(unitKey).value(JSON.stringify(doc)),
      ...[...creates].map(([key, a]) => this.#ns.put(key).value(JSON.stringify(a))),
      ...[...relocations]
        .filter(([key]) => !creates.has(key) && !deletes.has(key))
        .map(([key, a]) => this.#ns.put(key).value(JSON.stringify(a))),
      ...[...deletes].map((key) => this.#ns.delete().key(key)),
    );
    // One else (a second would replace the first): the admission record, then the identity.
    const reads = [
      ...(admitted === undefined ? [] : [this.#ns.get(admitted)]),
      ...(identity === undefined ? [] : [this.#ns.get(IDENTITY_KEY)]),
    ];
    if (reads.length > 0) txn = txn.else(...reads);
    const response = await this.#call(`commit ${pool}`, () => txn.commit());
    if (!response.succeeded) {
      // Kept from a store this process stopped trusting: it is what gets written back.
      if (this.#continuity.halted() === undefined) this.#docs.delete(pool);
      if (identity !== undefined) {
        const now = response.responses[admitted === undefined ? 0 : 1]?.response_range?.kvs[0]?.value.toString('utf8');
        if (now !== identity) {
          await this.#verifyIdentity();
          this.#refuseWhileHalted();
        }
      }
      if (admitted !== undefined && (response.responses[0]?.response_range?.kvs.length ?? 0) === 0) {
        return {
          kind: 'conflict',
          reason:
            `range ${guard?.rangePool} is no longer admitted in its address space: an overlapping range ` +
            `was admitted since`,
          admissionLost: true,
        };
      }
      return {
        kind: 'conflict',
        reason: `pool ${pool} changed since revision ${expected}, or an owner already holds an address in it`,
      };
    }
    const revision = Number(response.header.revision);
    this.#docs.set(pool, { revision, doc });
    for (const op of ops) if (op.op === 'release') this.#records.delete(`${pool}|${op.address}`);
    for (const a of creates.values()) this.#records.set(`${a.pool}|${a.address}`, a);
    return { kind: 'committed', revision };
  }

  async findByOwner(owner: Omit<Owner, 'ifname'> & { ifname?: string }): Promise<Allocation[]> {
    const prefix = `owners/${enc(owner.network)}/${enc(owner.containerID)}/${
      owner.ifname === undefined ? '' : `${enc(owner.ifname)}/`
    }`;
    const found = await this.#allocationsUnder(prefix);
    if (this.#continuity.halted() === undefined) for (const a of found) this.#records.set(`${a.pool}|${a.address}`, a);
    return found;
  }

  async #allocationsUnder(prefix: string): Promise<Allocation[]> {
    const response = await this.#call('list allocations', () => this.#ns.getAll().prefix(prefix).exec());
    const out: Allocation[] = [];
    for (const kv of response.kvs) {
      try {
        out.push(JSON.parse(kv.value.toString('utf8')) as Allocation);
      } catch (error) {
        throw new WarrenError(
          'IO_FAILURE',
          `etcd allocation record ${kv.key.toString('utf8')} is corrupt: ${messageOf(error)}`,
        );
      }
    }
    return out.sort((a, b) =>
      a.pool < b.pool ? -1 : a.pool > b.pool ? 1 : a.createdAt - b.createdAt || (a.address < b.address ? -1 : 1),
    );
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
      if (
        this.#continuity.halted() === undefined &&
        (!this.#docs.has(pool) || (this.#docs.get(pool)?.revision ?? 0) < revision)
      )
        this.#docs.set(pool, { revision, doc });
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

  /** Writes back what this process knew before the store lost its data; after the operator accepted it. */
  async #republish(node: string): Promise<AcceptReport> {
    const seen: SeenPool[] = [...this.#docs].map(([pool, { doc }]) => ({
      pool,
      allocations: doc.allocations,
      ...(doc.affinity === undefined ? {} : { affinity: doc.affinity }),
      ...(doc.description === undefined ? {} : { description: doc.description }),
      ...(doc.cooldownSeconds === undefined ? {} : { cooldownSeconds: doc.cooldownSeconds }),
    }));
    const records = new Map(this.#records);
    return republish({
      store: this,
      node,
      seen,
      records,
      described: (pool) => this.#docs.get(pool)?.doc.description !== undefined,
      now: Date.now(),
    });
  }

  async ping(): Promise<void> {
    // A linearizable read: answered only by a member that has a quorum behind it.
    await this.#call('ping', () =>
      this.#ns
        .get('nodes/')
        .options({ deadline: Date.now() + Math.min(this.#timeout, 1000) })
        .exec(),
    );
  }

  async close(): Promise<void> {
    await this.#membership.withdraw();
    this.#client.close();
  }
}
