/**
 * The second half of planning a move from whereabouts (pure, no I/O): for each address whereabouts
 * holds (holdings.ts), given its pod as the API server answered and what Warren's cluster tier
 * already holds, what the migration does with it.
 *
 * - The pod is gone, finished, or its network-status annotation does not list the address: the
 *   address is free (whereabouts' own reconciler judges a leftover by that annotation too).
 * - Warren already holds it for this very attachment (a grant recorded by an earlier run, or the
 *   allocation the agent made of one): nothing to do, so a second run records nothing twice.
 * - Warren holds it for anyone else (a published allocation of a block, a lent address, another
 *   grant): a conflict, reported and never overwritten.
 * - Otherwise: a grant to record in the request of (the pool serving the address, the pod's node),
 *   lender `whereabouts`, holder the attachment (network, container, interface, pod and its UID).
 *   The pool is the holding's, placed by serving-pools.ts (for nested ranges of one network_name,
 *   the outer range's pool); the checks against what Warren holds look in that same pool.
 *
 * Guarantees: every holding gets exactly one entry; a grant is planned only for a live, scheduled
 * pod whose attachment (network and interface) is known for certain, never guessed; the grants
 * planned for one (pool, node) are gathered in one write.
 */
import { LENT_NETWORK, MIGRATION_LENDER } from '../../allocator/lending/loans.ts';
import { defined } from '../../core/defined.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { blockCidrOfKey } from '../../ipam/blocks.ts';
import { parseIP } from '../../ipam/address.ts';
import type { Grant } from '../../store/tiered/cluster-tier.ts';
import { type Holding, cidrHolds } from './holdings.ts';
import type { PodFacts } from './pod-facts.ts';
import type { PodRef } from './whereabouts-objects.ts';

// The lender named in the grants the migration records, and a lender's placeholder: the agents'
// borrowing and lending sides (allocator/lending) read them, so they are defined there once.
export { LENT_NETWORK, MIGRATION_LENDER };

export type Outcome =
  /** Planned: to be recorded (or, after a dry run, what would be). */
  | 'record'
  | 'recorded'
  | 'already-recorded'
  /** The pod is gone or finished: the address is free. */
  | 'pod-gone'
  /** The pod runs but does not hold the address (its network-status says so): free. */
  | 'stale'
  | 'conflict'
  /** Not enough is known to give the address an owner without guessing. */
  | 'unresolved';

export interface PlanEntry {
  readonly pool: string;
  readonly address: string;
  /** `namespace/name`, when whereabouts named one. */
  readonly pod?: string;
  readonly node?: string;
  outcome: Outcome;
  detail?: string;
  readonly source: string;
}

/** The grants to add to the request of one (range pool, node). */
export interface RequestWrite {
  readonly pool: string;
  readonly node: string;
  readonly grants: readonly Grant[];
}

export interface Plan {
  readonly entries: PlanEntry[];
  readonly writes: readonly RequestWrite[];
}

/** A grant some request of the cluster holds. */
export interface HeldGrant {
  readonly pool: string;
  /** The node whose request it is: the borrower. */
  readonly node: string;
  readonly grant: Grant;
}

/** What Warren's cluster tier holds of the ranges being migrated. */
export interface WarrenView {
  /** Published allocations, keyed `<range pool>\n<address>`. */
  readonly allocations: ReadonlyMap<string, Allocation>;
  readonly grants: readonly HeldGrant[];
  /** Claimed block keys, by range pool. */
  readonly blocks: ReadonlyMap<string, readonly string[]>;
}

export interface PlanInput {
  readonly holdings: readonly Holding[];
  /** The pod as the API server answered (undefined: it does not exist). */
  readonly podOf: (pod: PodRef) => PodFacts | undefined;
  readonly warren: WarrenView;
  /** Milliseconds since the epoch: the grants' holders' `createdAt`. */
  readonly now: number;
}

export const podKey = (pod: PodRef): string => `${pod.namespace}/${pod.name}`;

const sameAttachment = (a: Pick<Allocation, 'network' | 'containerID' | 'ifname'>, b: typeof a): boolean =>
  a.network === b.network && a.containerID === b.containerID && a.ifname === b.ifname;

const describeHolder = (a: Allocation): string =>
  `${a.podNamespace !== undefined && a.podName !== undefined ? `pod ${a.podNamespace}/${a.podName}, ` : ''}` +
  `network ${a.network}, container ${a.containerID.slice(0, 12)}, interface ${a.ifname}, node ${a.node}`;

type Resolution = { holder: Allocation } | { outcome: Outcome; detail: string };

/** The attachment holding the address, or why there is none to migrate. */
function resolve(holding: Holding, facts: PodFacts | undefined, now: number): Resolution {
  const pod = holding.pod;
  if (pod === undefined) return { outcome: 'unresolved', detail: 'whereabouts recorded no pod for it' };
  const name = podKey(pod);
  if (facts === undefined) return { outcome: 'pod-gone', detail: `pod ${name} no longer exists: the address is free` };
  if (facts.finished) return { outcome: 'pod-gone', detail: `pod ${name} has finished: the address is free` };
  if (facts.node === undefined) return { outcome: 'unresolved', detail: `pod ${name} is not scheduled on a node` };
  const status = facts.attachments?.filter((a) => a.addresses.includes(holding.address));
  if (facts.attachments !== undefined && status !== undefined && status.length === 0)
    return {
      outcome: 'stale',
      detail: `pod ${name} does not hold it (its network-status lists other addresses): the address is free`,
    };
  const networks = [...new Set(holding.definitions.map((d) => d.network))];
  let network = networks.length === 1 ? networks[0] : undefined;
  if (network === undefined) {
    // Several definitions share the range: Multus' status names the one the pod was attached by.
    const named = new Set(
      (status ?? []).map((s) => (s.network.includes('/') ? s.network : `${pod.namespace}/${s.network}`)),
    );
    const chosen = [
      ...new Set(holding.definitions.filter((d) => named.has(`${d.namespace}/${d.name}`)).map((d) => d.network)),
    ];
    if (chosen.length !== 1)
      return {
        outcome: 'unresolved',
        detail:
          `the networks ${networks.join(', ')} share this range ` +
          `and pod ${name}'s network-status does not say which holds it`,
      };
    network = chosen[0];
  }
  const ifname = holding.ifname ?? (status?.length === 1 ? status[0]?.ifname : undefined);
  if (network === undefined || ifname === undefined)
    return {
      outcome: 'unresolved',
      detail: `whereabouts recorded no interface name, and pod ${name}'s network-status names none for it`,
    };
  return {
    holder: {
      pool: holding.pool,
      address: holding.address,
      network,
      containerID: holding.containerID,
      ifname,
      podNamespace: pod.namespace,
      podName: pod.name,
      podUID: facts.uid,
      node: facts.node,
      createdAt: now,
    },
  };
}

/** What Warren already holds at the holder's address: nothing, the holder itself, or someone else. */
function judge(
  holder: Allocation,
  warren: WarrenView,
): { outcome: 'already-recorded' | 'conflict'; detail: string } | undefined {
  const grants = warren.grants.filter((g) => g.pool === holder.pool && g.grant.address === holder.address);
  const published = warren.allocations.get(`${holder.pool}\n${holder.address}`);
  const ours = (g: HeldGrant): boolean =>
    g.node === holder.node &&
    g.grant.lender === MIGRATION_LENDER &&
    g.grant.holder !== undefined &&
    sameAttachment(g.grant.holder, holder);
  if (published !== undefined) {
    if (sameAttachment(published, holder) && published.node === holder.node)
      return { outcome: 'already-recorded', detail: `the agent on ${published.node} holds it` };
    // A lender's placeholder: ours when it lent the address to this node for this very attachment.
    const lentHere = published.network === LENT_NETWORK && published.containerID === holder.node && grants.some(ours);
    if (!lentHere) {
      const what =
        published.network === LENT_NETWORK
          ? `node ${published.node} lent it to node ${published.containerID}`
          : `Warren holds it for ${describeHolder(published)}`;
      return { outcome: 'conflict', detail: what };
    }
  }
  const other = grants.find((g) => !ours(g));
  if (other !== undefined) {
    const to = other.grant.holder === undefined ? `node ${other.node}` : describeHolder(other.grant.holder);
    return { outcome: 'conflict', detail: `already granted by ${other.grant.lender} to ${to}` };
  }
  if (grants.length > 0)
    return { outcome: 'already-recorded', detail: `granted to node ${holder.node} by an earlier run` };
  return undefined;
}

/** The claimed block holding `address` in `pool`, if any: named in the grant for its owner's sake. */
function blockHolding(pool: string, address: string, warren: WarrenView): string | undefined {
  const ip = parseIP(address);
  if (ip === undefined) return undefined;
  return warren.blocks.get(pool)?.find((key) => cidrHolds(blockCidrOfKey(key) ?? '', ip));
}

/** The plan: one entry per holding, and the grants to record, gathered per (pool, node). */
export function planMigration(input: PlanInput): Plan {
  const entries: PlanEntry[] = [];
  const writes = new Map<string, { pool: string; node: string; grants: Grant[] }>();
  for (const holding of input.holdings) {
    const facts = holding.pod === undefined ? undefined : input.podOf(holding.pod);
    const base = {
      pool: holding.pool,
      address: holding.address,
      ...(holding.pod === undefined ? {} : { pod: podKey(holding.pod) }),
      ...(facts?.node === undefined ? {} : { node: facts.node }),
      source: holding.source,
    };
    const resolution = resolve(holding, facts, input.now);
    if (!('holder' in resolution)) {
      entries.push({ ...base, outcome: resolution.outcome, detail: resolution.detail });
      continue;
    }
    const { holder } = resolution;
    const judged = judge(holder, input.warren);
    if (judged !== undefined) {
      entries.push({ ...base, outcome: judged.outcome, detail: judged.detail });
      continue;
    }
    const block = blockHolding(holder.pool, holder.address, input.warren);
    const grant: Grant = {
      address: holder.address,
      lender: MIGRATION_LENDER,
      ...defined({ block }),
      holder,
    };
    const key = `${holder.pool}\n${holder.node}`;
    const write = writes.get(key) ?? { pool: holder.pool, node: holder.node, grants: [] };
    write.grants.push(grant);
    writes.set(key, write);
    entries.push({ ...base, outcome: 'record' });
  }
  return { entries, writes: [...writes.values()] };
}
