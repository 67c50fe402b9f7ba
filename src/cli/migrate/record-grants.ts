/**
 * Writing a migration plan's grants into the cluster tier, and reading what the tier already holds
 * of the ranges being migrated (plan.ts's WarrenView).
 *
 * Each (range pool, node) has one request record; its grants are read, the planned ones merged in,
 * and the record replaced only at the version read (`updateRequest`), read again and merged again
 * when an agent changed it in between. A grant of the same address already in the record is left
 * as it is: the same attachment's is "already recorded" (running twice records nothing twice),
 * anyone else's is a conflict, never overwritten.
 *
 * Guarantees: no grant another writer put in a request is ever dropped or changed; a request's
 * `wanted` is written back as read; each planned grant ends `recorded`, `already-recorded` or
 * `conflict`, or the whole run fails with the tier's error.
 */
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import type { AddressRequest, ClusterTier, Grant } from '../../store/tiered/cluster-tier.ts';
import { type HeldGrant, MIGRATION_LENDER, type Plan, type PlanEntry, type WarrenView } from './plan.ts';

/** Attempts at one request while agents keep changing it. */
const MAX_ATTEMPTS = 20;
const PAGE = { limit: 500 } as const;

const sameHolder = (a: Allocation | undefined, b: Allocation | undefined): boolean =>
  a !== undefined &&
  b !== undefined &&
  a.network === b.network &&
  a.containerID === b.containerID &&
  a.ifname === b.ifname &&
  a.node === b.node;

/** What the tier holds of `pools`: published allocations, every grant of them, claimed blocks. */
export async function readWarrenView(tier: ClusterTier, pools: ReadonlySet<string>): Promise<WarrenView> {
  const allocations = new Map<string, Allocation>();
  const blocks = new Map<string, string[]>();
  const lenders = new Set<string>([MIGRATION_LENDER]);
  for (const pool of pools) {
    const keys: string[] = [];
    for (let token: string | undefined, first = true; first || token !== undefined; first = false) {
      const page = await tier.claimsIn(pool, { ...PAGE, ...defined({ continue: token }) });
      for (const claim of page.items) {
        keys.push(claim.key);
        lenders.add(claim.node);
      }
      token = page.continue;
    }
    blocks.set(pool, keys);
    for (let token: string | undefined, first = true; first || token !== undefined; first = false) {
      const page = await tier.published({ pool }, { ...PAGE, ...defined({ continue: token }) });
      for (const block of page.items) for (const a of block.allocations) allocations.set(`${pool}\n${a.address}`, a);
      token = page.continue;
    }
  }
  // Every grant of these ranges was lent by an owner of one of their blocks, or by the migration;
  // open requests are read too, for a grant whose lender gave its block back since.
  const grants: HeldGrant[] = [];
  const seen = new Set<string>();
  const requests = [...(await Promise.all([...pools].map((pool) => tier.openRequests(pool)))).flat()];
  for (const lender of lenders) requests.push(...(await tier.requestsLentBy(lender)));
  for (const request of requests) {
    if (!pools.has(request.pool) || seen.has(`${request.pool}\n${request.node}`)) continue;
    seen.add(`${request.pool}\n${request.node}`);
    for (const grant of request.grants) grants.push({ pool: request.pool, node: request.node, grant });
  }
  return { allocations, grants, blocks };
}

/** Records the plan's grants; updates the plan's entries with what became of each. */
export async function recordGrants(tier: ClusterTier, plan: Plan): Promise<void> {
  const entryOf = new Map<string, PlanEntry>(plan.entries.map((e) => [`${e.pool}\n${e.address}`, e]));
  for (const write of plan.writes) {
    const settle = (grant: Grant, outcome: PlanEntry['outcome'], detail?: string): void => {
      const entry = entryOf.get(`${write.pool}\n${grant.address}`);
      if (entry === undefined) return;
      entry.outcome = outcome;
      if (detail === undefined) delete entry.detail;
      else entry.detail = detail;
    };
    for (let attempt = 1; ; attempt++) {
      const request: AddressRequest =
        (await tier.requestOf(write.pool, write.node)) ?? (await tier.ask(write.pool, write.node, 0));
      const added: Grant[] = [];
      for (const grant of write.grants) {
        const held = request.grants.find((g) => g.address === grant.address);
        if (held === undefined) added.push(grant);
        else if (held.lender === MIGRATION_LENDER && sameHolder(held.holder, grant.holder))
          settle(grant, 'already-recorded', `granted to node ${write.node} by an earlier run`);
        else settle(grant, 'conflict', `node ${write.node}'s request already holds it, lent by ${held.lender}`);
      }
      if (added.length === 0) break;
      const updated = await tier.updateRequest(request, [...request.grants, ...added], request.wanted);
      if (updated !== undefined) {
        for (const grant of added) settle(grant, 'recorded');
        break;
      }
      if (attempt >= MAX_ATTEMPTS)
        throw new WarrenError(
          'TRY_AGAIN',
          `the request of node ${write.node} for ${write.pool} changed ${MAX_ATTEMPTS} times while the ` +
            'migration wrote it; run the migration again (what it recorded stays recorded)',
        );
    }
  }
}
