/**
 * The agent's own request rate to etcd on the etcd store (store/etcd-tier/etcd-requests.ts), told
 * and judged as the Kubernetes store's is (kube-api-checks.ts): one line for `warren status` and
 * `warren doctor`, and a warning when an agent with nothing to do keeps reading the keyspace. An
 * idle agent learns what changes from its watches, and keeps only its lease alive; a periodic Range
 * is paid by etcd on every node (issue 36). Pure.
 */
import type { DoctorFacts } from '../../api/doctor.ts';
import type { EtcdRequestRate } from '../../store/etcd-tier/etcd-requests.ts';
import { type Finding, ok, warning } from './finding.ts';

/** Ranges a minute above which an idle agent is said to poll etcd. */
export const IDLE_RANGES_PER_MINUTE = 1;

/** What writes: an agent that sent none of these in the window did nothing but keep its lease. */
const WRITES = new Set(['put', 'txn', 'delete', 'compact', 'lease-grant', 'lease-revoke']);

/** `12/min over the last 10 min (lease-keepalive 12, range 0)`. */
export function describeEtcdRate(rate: EtcdRequestRate): string {
  const kinds = rate.byKind.map((k) => `${k.kind} ${k.perMinute}`);
  const parts = rate.byKind.some((k) => k.kind === 'range') ? kinds : [...kinds, 'range 0'];
  return `${rate.perMinute}/min over the last ${rate.minutes} min (${parts.join(', ')})`;
}

export function etcdApiFindings(facts: DoctorFacts): Finding[] {
  const rate = facts.etcdApi;
  if (rate === undefined) return [];
  const idle = !rate.byKind.some((k) => WRITES.has(k.kind));
  const ranges = rate.byKind.find((k) => k.kind === 'range')?.perMinute ?? 0;
  if (!idle || ranges <= IDLE_RANGES_PER_MINUTE)
    return [
      ok('etcd-request-rate', `etcd requests: ${describeEtcdRate(rate)}`, 'etcd is not read over and over while idle'),
    ];
  return [
    warning(
      'etcd-idle-reads',
      'the agent is idle and keeps reading etcd',
      `etcd requests: ${describeEtcdRate(rate)}; Ranges while idle: ${ranges}/min (above ` +
        `${IDLE_RANGES_PER_MINUTE}/min), on every node`,
      'upgrade to a Warren that learns from its etcd watches instead of reading again (issue 36); ' +
        'warren_etcd_requests_total shows the requests by kind',
    ),
  ];
}
