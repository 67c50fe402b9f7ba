/**
 * The move from whereabouts, end to end, on what it is handed: read whereabouts' objects and the
 * definitions (a WhereaboutsReader), the pods holding addresses, and what Warren's cluster tier
 * holds of those ranges; plan (holdings.ts, plan.ts); and, unless it is a dry run, record the
 * grants (record-grants.ts). The command line (migrate-command.ts) only opens the two and prints.
 * Before planning, each address is placed in the pool that serves it (serving-pools.ts): with
 * nested ranges of one network_name, an inner range's addresses live in the outer range's pool,
 * and a grant recorded anywhere else would let that pool hand them out again.
 *
 * Guarantees: a dry run makes no write to the tier (not even an admission of a range) and none to
 * the API server (the reader only reads); a pod is read once however many addresses it holds, at
 * most POD_READS at a time.
 */
import type { ClusterTier } from '../../store/tiered/cluster-tier.ts';
import { collectHoldings } from './holdings.ts';
import type { WhereaboutsReader } from './kube-reads.ts';
import { type PodFacts, podFactsOf } from './pod-facts.ts';
import { planMigration, podKey } from './plan.ts';
import { readWarrenView, recordGrants } from './record-grants.ts';
import type { MigrationReport } from './report.ts';
import { servingPools } from './serving-pools.ts';
import type { PodRef } from './whereabouts-objects.ts';

/** Pods read at once. */
const POD_READS = 8;

export interface MigrationOptions {
  readonly reader: WhereaboutsReader;
  readonly tier: ClusterTier;
  readonly dryRun: boolean;
  /** Milliseconds since the epoch (the grants' holders' `createdAt`). */
  readonly now: number;
}

async function readPods(
  reader: WhereaboutsReader,
  pods: readonly PodRef[],
): Promise<Map<string, PodFacts | undefined>> {
  const facts = new Map<string, PodFacts | undefined>();
  const queue = [...new Map(pods.map((p) => [podKey(p), p])).values()];
  const worker = async (): Promise<void> => {
    for (let pod = queue.shift(); pod !== undefined; pod = queue.shift())
      facts.set(podKey(pod), podFactsOf(await reader.pod(pod.namespace, pod.name)));
  };
  await Promise.all(Array.from({ length: Math.min(POD_READS, queue.length) }, worker));
  return facts;
}

export async function migrateWhereabouts(o: MigrationOptions): Promise<MigrationReport> {
  const [definitions, ipPools, reservations] = [
    await o.reader.list('definitions'),
    await o.reader.list('ipPools'),
    await o.reader.list('reservations'),
  ];
  const collected = collectHoldings({ definitions, ipPools, reservations });
  const { problems } = collected;
  const ranges = collected.definitions.flatMap((d) => d.ipam.ranges.map((r) => r.pool));
  const poolOf = await servingPools(o.tier.spaces, ranges, o.dryRun);
  const holdings = collected.holdings.map((h) => ({ ...h, pool: poolOf(h.pool, h.address) }));
  const pods = await readPods(
    o.reader,
    holdings.flatMap((h) => (h.pod === undefined ? [] : [h.pod])),
  );
  const warren = await readWarrenView(o.tier, new Set(holdings.map((h) => h.pool)));
  const plan = planMigration({ holdings, podOf: (pod) => pods.get(podKey(pod)), warren, now: o.now });
  if (!o.dryRun) await recordGrants(o.tier, plan);
  return { dryRun: o.dryRun, entries: plan.entries, problems };
}
