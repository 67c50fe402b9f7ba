/**
 * What an agent writes back into a store that lost its data, when the operator accepts that store
 * (`warren store accept`): what it still knows, from the pool documents and allocation records it
 * saw before the loss. Written through the store's own commits, so every rule of a commit holds.
 *
 * What it re-publishes:
 * - every address of every block this node had claimed (its own containers', and those of nodes
 *   that borrowed from it), with the block's claim;
 * - every address it knows to be this node's in any other pool (its allocation record said so);
 * - each range's block size (a range pool's description), so no agent can split it differently.
 * What it never assumes:
 * - that an address is free because it is not in its cache: the cache holds what this process read
 *   or wrote since it started, so an address handed out elsewhere since, or before it read the pool,
 *   is not re-published here (its own agent re-publishes it when accepted there);
 * - that what the store holds now is wrong: nothing present is overwritten. An address the store
 *   now gives to another owner, or a block claimed by another node, is reported as a conflict for
 *   the operator, and left as it is.
 * A record it does not have (an address seen in a document only) is re-published with what the
 * document says (network, container, interface) and the block's node.
 */
import type { Allocation } from '../ipam/allocation.ts';
import type { AcceptReport, PoolDescription, PoolOp, Store } from './store.ts';

/** A pool document as last seen before the loss. */
export interface SeenPool {
  readonly pool: string;
  readonly affinity?: string;
  readonly description?: PoolDescription;
  readonly cooldownSeconds?: number;
  /** address → owner [network, containerID, ifname] */
  readonly allocations: Readonly<Record<string, readonly [string, string, string]>>;
}

export interface RepublishInput {
  readonly store: Pick<Store, 'readPool' | 'commit' | 'findByOwner'>;
  readonly node: string;
  readonly seen: readonly SeenPool[];
  /** Allocation records seen, by `pool|address`. */
  readonly records: ReadonlyMap<string, Allocation>;
  /** Whether the pool's document, as just read, has a description (a snapshot does not carry it). */
  readonly described: (pool: string) => boolean;
  readonly now: number;
}

const ATTEMPTS = 4;

export async function republish(input: RepublishInput): Promise<AcceptReport> {
  const { store, node, records } = input;
  let addresses = 0;
  let blocks = 0;
  const conflicts: string[] = [];
  for (const seen of input.seen) {
    const own = seen.affinity === node;
    // A record counts only for the owner the document names: one seen earlier may be of an owner
    // that released the address since.
    const recordOf = (
      address: string,
      [network, containerID, ifname]: readonly [string, string, string],
    ): Allocation | undefined => {
      const r = records.get(`${seen.pool}|${address}`);
      return r !== undefined && r.network === network && r.containerID === containerID && r.ifname === ifname
        ? r
        : undefined;
    };
    const wanted = Object.entries(seen.allocations).filter(
      ([address, owner]) => own || recordOf(address, owner)?.node === node,
    );
    if (!own && wanted.length === 0 && seen.description?.blockPrefix === undefined) continue;
    let done = false;
    for (let attempt = 1; attempt <= ATTEMPTS && !done; attempt++) {
      const read = await store.readPool(seen.pool);
      if (read.kind !== 'snapshot') continue;
      const present = new Set(read.allocations);
      const ops: PoolOp[] = [];
      const found: string[] = [];
      let written = 0;
      for (const [address, [network, containerID, ifname]] of wanted) {
        if (present.has(address)) {
          const theirs = (await store.findByOwner({ network, containerID, ifname })).some(
            (a) => a.pool === seen.pool && a.address === address,
          );
          if (!theirs)
            found.push(
              `${address} (held by container ${containerID}, ${ifname}, in ${seen.pool}) is allocated to ` +
                `another owner in the store now`,
            );
          continue;
        }
        const allocation = recordOf(address, [network, containerID, ifname]) ?? {
          pool: seen.pool,
          address,
          network,
          containerID,
          ifname,
          node: seen.affinity ?? node,
          createdAt: input.now,
        };
        ops.push({ op: 'allocate', allocation });
        written += 1;
      }
      let claimed = false;
      if (own && read.affinity === undefined) {
        ops.push({ op: 'claim', node });
        claimed = true;
      } else if (own && read.affinity !== node) {
        found.push(`block ${seen.pool} of this node is claimed by node ${read.affinity} in the store now`);
      }
      if (seen.description !== undefined && !input.described(seen.pool))
        ops.push({ op: 'describe', description: seen.description });
      if (seen.cooldownSeconds !== undefined && read.cooldownSeconds === undefined)
        ops.push({ op: 'cooldown', seconds: seen.cooldownSeconds });
      if (ops.length === 0) {
        conflicts.push(...found);
        done = true;
        break;
      }
      const result = await store.commit(seen.pool, read.revision, ops);
      if (result.kind === 'committed') {
        addresses += written;
        if (claimed) blocks += 1;
        conflicts.push(...found);
        done = true;
      } else if (attempt === ATTEMPTS) {
        conflicts.push(
          `pool ${seen.pool}: not written back (${result.reason}); one of its owners may hold another ` +
            `address in the store now`,
        );
      }
    }
  }
  return { addresses, blocks, conflicts };
}
