/**
 * This node's membership of the cluster on etcd: its announcement under a lease (renewed, and made
 * again after the lease was lost while etcd was away), the live nodes, and one-off cluster chores
 * claimed on the claimer's lease. Apart from etcd-store.ts, which owns the allocation documents.
 */
import type { Lease, Namespace } from 'etcd3';
import type { Membership, NodeRecord } from './store.ts';

export interface EtcdMembershipOptions {
  /** The store's namespace (its key prefix). */
  readonly ns: Namespace;
  /** Lifetime of the announcement when its agent stops renewing it, seconds. */
  readonly leaseSeconds: number;
  /** Runs one etcd call, turning transport failures into TRY_AGAIN that names etcd. */
  readonly call: <T>(what: string, body: () => Promise<T>) => Promise<T>;
}

const enc = encodeURIComponent;

/** Where the claim of a cluster chore (`forget-node/n3`) lives in etcd. */
function taskKey(task: string): string {
  return `tasks/${task.split('/').map(enc).join('/')}`;
}

/** The node that holds a chore's claim; undefined for a value Warren did not write. */
function claimantOf(value: Buffer | undefined): string | undefined {
  try {
    const node: unknown = value === undefined ? undefined : (JSON.parse(value.toString('utf8')) as { node?: unknown }).node;
    return typeof node === 'string' ? node : undefined;
  } catch {
    return undefined;
  }
}

export class EtcdMembership implements Membership {
  readonly #o: EtcdMembershipOptions;
  #lease: Lease | undefined;
  #announced: { node: string; since: number; version: string } | undefined;

  constructor(options: EtcdMembershipOptions) {
    this.#o = options;
  }

  async announce(node: string, info: { since: number; version: string }): Promise<void> {
    this.#announced = { node, ...info };
    await this.#grant();
  }

  /** (Re)creates the lease and the node key; called at announce and whenever the lease was lost. */
  async #grant(): Promise<void> {
    const announced = this.#announced;
    if (announced === undefined) return;
    const lease = this.#o.ns.lease(this.#o.leaseSeconds);
    this.#lease = lease;
    lease.on('lost', () => {
      if (this.#lease === lease) this.#lease = undefined;
    });
    await this.#o.call('announce node', () => lease.put(`nodes/${enc(announced.node)}`).value(JSON.stringify(announced)).exec());
  }

  /** Re-announces after a lost lease (etcd was away longer than the lease). Cheap when all is well. */
  async renew(): Promise<void> {
    if (this.#announced !== undefined && (this.#lease === undefined || this.#lease.revoked())) await this.#grant();
  }

  /**
   * One transaction: the claim is put on this node's lease when the key is free, and read back
   * when it is not. A claim this node already holds is won again: a winner whose chore failed
   * halfway takes it up at its next try instead of being refused by its own claim, while every
   * other node is refused until the claim is released or goes with the winner's lease.
   */
  async claimTask(task: string): Promise<boolean> {
    const lease = this.#lease;
    const announced = this.#announced;
    if (lease === undefined || announced === undefined) return false;
    const id = await this.#o.call('claim a task', () => lease.grant());
    const key = taskKey(task);
    const claim = JSON.stringify({ node: announced.node, at: Date.now() });
    const result = await this.#o.call('claim a task', () =>
      this.#o.ns.if(key, 'Create', '==', 0).then(this.#o.ns.put(key).value(claim).lease(id)).else(this.#o.ns.get(key)).commit(),
    );
    if (result.succeeded) return true;
    return claimantOf(result.responses[0]?.response_range?.kvs[0]?.value) === announced.node;
  }

  async releaseTask(task: string): Promise<void> {
    await this.#o.call('release a task', () => this.#o.ns.delete().key(taskKey(task)).exec());
  }

  async liveNodes(): Promise<NodeRecord[]> {
    const values = await this.#o.call('list nodes', () => this.#o.ns.getAll().prefix('nodes/').strings());
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

  async withdraw(): Promise<void> {
    const lease = this.#lease;
    this.#announced = undefined;
    this.#lease = undefined;
    if (lease !== undefined) await lease.revoke().catch(() => undefined);
  }
}
