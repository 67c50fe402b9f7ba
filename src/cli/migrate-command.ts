/**
 * `warren migrate whereabouts [--dry-run] [--kubeconfig F] [--namespace NS] [--json]`: records the
 * addresses whereabouts holds for running pods in Warren's kubernetes store, as grants the agents
 * adopt, so the NetworkAttachmentDefinitions can switch to Warren with no pod restarted and no
 * address handed out twice (README, "Migrate from whereabouts"). The work is in migrate/; this
 * file reads the flags, opens the API server and the cluster tier, and prints. The kubeconfig is
 * `--kubeconfig`, else WARREN_KUBECONFIG, else kubectl's KUBECONFIG, else the pod's service account;
 * the namespace (of Warren's Leases, which the migration does not touch) `--namespace`, else
 * WARREN_NAMESPACE, else `warren`.
 *
 * Exit codes: 0 every address of a live pod is recorded (or would be, with --dry-run); 1 a
 * conflict, an address that could not be given an owner, an object that could not be read, or a
 * failure; 2 a usage error.
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
import { UsageError } from './usage.ts';

export interface MigrateDeps {
  readonly clock?: Clock;
  /** Opens the cluster tier (tests); default the kubernetes store's. */
  readonly openTier?: (o: { kubeConfig: KubeAccess; namespace: string; clock: Clock }) => Promise<ClusterTier>;
  readonly reader?: (kubeConfig: KubeAccess) => WhereaboutsReader;
}

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
    },
    allowPositionals: true,
    strict: true,
  });
  const [from, ...extra] = positionals;
  if (from !== 'whereabouts')
    throw new UsageError(
      from === undefined
        ? 'migrate needs a source: migrate whereabouts'
        : `cannot migrate from "${from}"; migrate whereabouts`,
    );
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const clock = deps.clock ?? systemClock;
  const kubeConfig = loadKubeConfig(context.kubeconfig(values.kubeconfig));
  const namespace = context.migrationNamespace(values.namespace);
  const tier = await (deps.openTier ?? openKubernetesTier)({ kubeConfig, namespace, clock });
  try {
    const report = await migrateWhereabouts({
      reader: (deps.reader ?? ((c) => new KubeReader(c)))(kubeConfig),
      tier,
      dryRun: values['dry-run'],
      now: clock.now(),
    });
    io.out(values.json ? reportJson(report) : reportText(report));
    return exitStatusOf(report);
  } finally {
    await tier.close();
  }
}
