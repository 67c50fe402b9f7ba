/**
 * The agent's own request rate to the Kubernetes API server (store/kubernetes/api-requests.ts),
 * told and judged: one line for `warren status` and `warren doctor`, and a warning when an agent
 * with nothing to do keeps LISTing a resource. An idle agent should learn what changes from its
 * watches; a periodic LIST is read by the API server from etcd through every object of its kind,
 * and every node pays it (issue 36). Pure.
 */
import type { DoctorFacts } from '../../api/doctor.ts';
import type { ApiRequestRate, ApiVerb } from '../../store/kubernetes/api-requests.ts';
import { type Finding, ok, warning } from './finding.ts';

/** LISTs a minute of one resource above which an idle agent is said to poll it. */
export const IDLE_LIST_PER_MINUTE = 1;

const VERBS: readonly ApiVerb[] = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];

/** `12.5/min over the last 10 min (list 6, watch 0.4, update 6)`. */
export function describeApiRate(rate: ApiRequestRate): string {
  const verbs = VERBS.filter((verb) => verb === 'list' || rate.byVerb[verb] !== undefined);
  const parts = verbs.map((verb) => `${verb} ${rate.byVerb[verb] ?? 0}`);
  return `${rate.perMinute}/min over the last ${rate.minutes} min (${parts.join(', ')})`;
}

/**
 * Idle: in the window the agent wrote nothing but its Lease and Events (no claim, no publication,
 * no request answered): what it still LISTs then, it polls.
 */
function idle(rate: ApiRequestRate): boolean {
  return !rate.byKind.some(
    (k) =>
      k.verb !== 'get' && k.verb !== 'list' && k.verb !== 'watch' && k.resource !== 'leases' && k.resource !== 'events',
  );
}

export function kubeApiFindings(facts: DoctorFacts): Finding[] {
  const rate = facts.kubeApi;
  if (rate === undefined) return [];
  const polled = idle(rate) ? rate.byKind.filter((k) => k.verb === 'list' && k.perMinute > IDLE_LIST_PER_MINUTE) : [];
  if (polled.length === 0)
    return [
      ok('kube-api-rate', `API requests: ${describeApiRate(rate)}`, 'no resource is LISTed over and over while idle'),
    ];
  const named = polled.map((k) => `${k.resource} ${k.perMinute}/min`).join(', ');
  return [
    warning(
      'kube-api-idle-lists',
      `the agent is idle and keeps LISTing ${polled.map((k) => k.resource).join(', ')}`,
      `API requests: ${describeApiRate(rate)}; LISTs while idle: ${named} (above ${IDLE_LIST_PER_MINUTE}/min each). ` +
        'Each LIST is read by the API server from etcd through every object of its kind, on every node',
      'upgrade to a Warren that watches these resources instead of polling them (issue 36); ' +
        'warren_kube_api_requests_total shows the requests by verb, resource and code',
    ),
  ];
}
