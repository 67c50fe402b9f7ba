/**
 * What Warren holds of some range pools, for `warren migrate to-whereabouts`: every node's
 * allocations as the cluster tier publishes them (what `warren allocations --cluster` lists, read
 * the same way: the published view, block by block and page by page, loan ledgers included), and
 * the grants a forward migration recorded that no agent has adopted yet (their holder still holds
 * the address; it is published once adopted).
 *
 * Each address ends as one of:
 * - a container's (`holders`): the attachment holding it (a lent address as its borrower's loan
 *   ledger publishes it, never as the lender's placeholder);
 * - bookkeeping only (`bookkeeping`): Warren holds it for no container (a lender's placeholder whose
 *   loan holds no container, an address held for a StatefulSet ordinal or an IPAMClaim with no pod
 *   using it, one announced, a loan given back): not a pod's, so not written as one;
 * - held for two attachments at once (`problems`): reported, never written.
 * An address a block's owner may hand out next (`ahead`) holds nothing yet and is not read.
 *
 * Guarantees: read only; every listing is paged; an address of one range pool is in exactly one
 * of the three answers.
 */
import { defined } from '../../core/defined.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { ownerKey } from '../../ipam/allocation.ts';
import { bookkeepingLabel, isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { ClusterRecords } from '../../store/cluster.ts';
import { isMigrated } from '../../allocator/lending/migrated.ts';
import { MIGRATION_LENDER } from './plan.ts';

const PAGE = { limit: 500 } as const;

/** A container's hold on an address of a range pool. */
export interface WarrenHolder {
  /** The range pool (not the block's key). */
  readonly pool: string;
  readonly allocation: Allocation;
  /** `published` by the node holding it, or `grant`: recorded by a migration, not yet adopted. */
  readonly from: 'published' | 'grant';
}

export interface WarrenHeld {
  readonly holders: readonly WarrenHolder[];
  /** Addresses held for no container: what each is (`lent to n2`, `held: statefulset/…`). */
  readonly bookkeeping: ReadonlyArray<{ readonly pool: string; readonly address: string; readonly what: string }>;
  readonly problems: ReadonlyArray<{ readonly pool: string; readonly address: string; readonly message: string }>;
}

const describeHolder = (a: Allocation): string =>
  `${a.podNamespace !== undefined && a.podName !== undefined ? `pod ${a.podNamespace}/${a.podName}, ` : ''}` +
  `container ${a.containerID.slice(0, 12)}, interface ${a.ifname}, node ${a.node}`;

/** Reads what Warren holds of `pools` (range pool keys); see the module header. */
export async function readWarrenHeld(tier: ClusterRecords, pools: ReadonlySet<string>): Promise<WarrenHeld> {
  const holders: WarrenHolder[] = [];
  const bookkeeping: Array<{ pool: string; address: string; what: string }> = [];
  const problems: Array<{ pool: string; address: string; message: string }> = [];
  const migrated = new Map<string, Allocation[]>();
  for (const request of await tier.requestsLentBy(MIGRATION_LENDER)) {
    if (!pools.has(request.pool)) continue;
    for (const grant of request.grants)
      if (isMigrated(grant) && grant.returned !== true) {
        const key = `${request.pool}\n${grant.address}`;
        migrated.set(key, [...(migrated.get(key) ?? []), grant.holder]);
      }
  }
  for (const pool of pools) {
    const containers = new Map<string, Map<string, Allocation>>();
    const kept = new Map<string, string>();
    for (let token: string | undefined, first = true; first || token !== undefined; first = false) {
      const page = await tier.published({ pool }, { ...PAGE, ...defined({ continue: token }) });
      for (const block of page.items)
        for (const a of block.allocations) {
          if (isBookkeeping(a)) {
            if (!kept.has(a.address)) kept.set(a.address, bookkeepingLabel(a) ?? a.network);
            continue;
          }
          const at = containers.get(a.address) ?? new Map<string, Allocation>();
          at.set(ownerKey(a), a);
          containers.set(a.address, at);
        }
      token = page.continue === '' ? undefined : page.continue;
    }
    // A migrated address is published once its node adopted it; until then its grant holds it.
    const granted = new Set<string>();
    for (const [key, grants] of migrated) {
      const [grantPool, address = ''] = key.split('\n');
      if (grantPool !== pool || containers.has(address)) continue;
      containers.set(address, new Map(grants.map((holder) => [ownerKey(holder), { ...holder, pool }])));
      granted.add(address);
    }
    for (const [address, at] of containers) {
      const [only, ...more] = at.values();
      if (only === undefined) continue;
      if (more.length > 0)
        problems.push({
          pool,
          address,
          message: `Warren holds it for ${[only, ...more].map(describeHolder).join(' and for ')}`,
        });
      else holders.push({ pool, allocation: { ...only, pool }, from: granted.has(address) ? 'grant' : 'published' });
    }
    for (const [address, what] of kept) if (!containers.has(address)) bookkeeping.push({ pool, address, what });
  }
  return { holders, bookkeeping, problems };
}
