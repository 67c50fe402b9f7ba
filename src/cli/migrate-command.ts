/**
 * `warren migrate whereabouts [--dry-run] [--kubeconfig F] [--namespace NS] [--json]`: records the
 * addresses whereabouts holds for running pods in Warren's kubernetes store, as grants the agents
 * adopt, so the NetworkAttachmentDefinitions can switch to Warren with no pod restarted and no
 * address handed out twice (README, "Migrate from whereabouts").
 * `warren migrate to-whereabouts [--network N | --nad NS/NAME]... [--whereabouts-namespace NS]
 * [--dry-run] [--json]`: the way back: writes the addresses Warren holds for containers in the
 * networks of type warren into whereabouts' IPPools and OverlappingRangeIPReservations, so the
 * definitions can switch back to whereabouts (migrate/rollback.ts). The work is in migrate/; this
 * file reads the flags, opens the API server and the cluster tier, and prints. The kubeconfig is
 * `--kubeconfig`, else WARREN_KUBECONFIG, else kubectl's KUBECONFIG, else the pod's service account;
 * the namespace (of Warren's Leases, which the migration does not touch) `--namespace`, else
 * WARREN_NAMESPACE, else `warren`.
 *
 * Exit codes: 0 every address of a live pod is recorded (or would be, with --dry-run; back: every
 * address a container holds in Warren is in whereabouts' objects); 1 a conflict, an address that
 * could not be given an owner, an object that could not be read, or a failure; 2 a usage error.
 */
import { parseArgs } from 'node:util';
import { type Clock, systemClock } from '../core/clock.ts';
import { loadKubeConfig } from '../sources/kubernetes/kubeconfig.ts';
import type { KubeAccess } from '../store/kubernetes/kube-access.ts';
import type { ClusterTier } from '../store/tiered/cluster-tier.ts';
import { type CliContext, cliContext } from './context.ts';
import type { CliIO } from './io.ts';
import { KubeReader, type WhereaboutsReader } from './migrate/kube-reads.ts';
import { migrateWhereabouts } from './migrate/migrate.ts';
import { exitStatusOf, reportJson, reportText } from './migrate/report.ts';
import { KubeWriter, type WhereaboutsWriter } from './migrate/kube-writes.ts';
import { rollBackToWhereabouts } from './migrate/rollback.ts';
import { rollbackExitStatus, rollbackJson, rollbackText } from './migrate/rollback-report.ts';
import { UsageError } from './usage.ts';

export interface MigrateDeps {
  readonly clock?: Clock;
  /** Opens the cluster tier (tests); default the kubernetes store's. */
  readonly openTier?: (o: { kubeConfig: KubeAccess; namespace: string; clock: Clock }) => Promise<ClusterTier>;
  readonly reader?: (kubeConfig: KubeAccess) => WhereaboutsReader;
  readonly writer?: (kubeConfig: KubeAccess) => WhereaboutsWriter;
}

const DIRECTIONS = 'migrate whereabouts, or migrate to-whereabouts';

async function openKubernetesTier(o: {
  kubeConfig: KubeAccess;
  namespace: string;
  clock: Clock;
}): Promise<ClusterTier> {
  const { openKubeTier } = await import('../store/kubernetes/tier.ts');
  // The migration holds no lease; the length only matters to agents.
  return await openKubeTier({ ...o, leaseSeconds: 15 });
}

export async function migrateCommand(
  argv: readonly string[],
  io: CliIO,
  deps: MigrateDeps = {},
  context: CliContext = cliContext(io.env),
): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...argv],
    options: {
      'dry-run': { type: 'boolean', default: false },
      kubeconfig: { type: 'string' },
      namespace: { type: 'string' },
      json: { type: 'boolean', default: false },
      network: { type: 'string', multiple: true, default: [] },
      nad: { type: 'string', multiple: true, default: [] },
      'whereabouts-namespace': { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  });
  const [from, ...extra] = positionals;
  if (from !== 'whereabouts' && from !== 'to-whereabouts')
    throw new UsageError(
      from === undefined ? `migrate needs a direction: ${DIRECTIONS}` : `cannot migrate "${from}"; ${DIRECTIONS}`,
    );
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const back = from === 'to-whereabouts';
  if (!back && (values.network.length > 0 || values.nad.length > 0 || values['whereabouts-namespace'] !== undefined))
    throw new UsageError('--network, --nad and --whereabouts-namespace are for migrate to-whereabouts');
  for (const nad of values.nad)
    if (!/^[^/]+\/[^/]+$/.test(nad)) throw new UsageError(`--nad takes namespace/name, got "${nad}"`);
  const clock = deps.clock ?? systemClock;
  const kubeConfig = loadKubeConfig(context.kubeconfig(values.kubeconfig));
  const namespace = context.migrationNamespace(values.namespace);
  const tier = await (deps.openTier ?? openKubernetesTier)({ kubeConfig, namespace, clock });
  try {
    const reader = (deps.reader ?? ((c) => new KubeReader(c)))(kubeConfig);
    if (back) {
      const report = await rollBackToWhereabouts({
        reader,
        writer: (deps.writer ?? ((c) => new KubeWriter(c)))(kubeConfig),
        tier,
        selection: { networks: values.network, definitions: values.nad },
        namespace: values['whereabouts-namespace'],
        dryRun: values['dry-run'],
      });
      io.out(values.json ? rollbackJson(report) : rollbackText(report));
      return rollbackExitStatus(report);
    }
    const report = await migrateWhereabouts({ reader, tier, dryRun: values['dry-run'], now: clock.now() });
    io.out(values.json ? reportJson(report) : reportText(report));
    return exitStatusOf(report);
  } finally {
    await tier.close();
  }
}
