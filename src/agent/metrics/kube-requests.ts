/**
 * `warren_kube_api_requests_total{verb,resource,code}`: the agent's own requests to the Kubernetes
 * API server, read at each scrape from the one counter both clients report to
 * (store/kubernetes/api-requests.ts), so the metric is never a second count that could drift.
 * Cardinality is bounded: verbs and codes are closed lists, resources are the few kinds the agent uses.
 */
import { Counter, type Registry } from 'prom-client';
import type { ApiRequestCounter } from '../../store/kubernetes/api-requests.ts';

export function registerKubeApiRequests(registry: Registry, requests: ApiRequestCounter): void {
  new Counter({
    name: 'warren_kube_api_requests_total',
    help:
      'Requests the agent sent to the Kubernetes API server, by verb (get, list, watch, create, update, ' +
      'patch, delete), resource (plural) and code (2xx, 404, 409, 410, 4xx, 5xx, or unreachable: no answer).',
    labelNames: ['verb', 'resource', 'code'],
    registers: [registry],
    collect() {
      this.reset();
      for (const t of requests.totals()) this.inc({ verb: t.verb, resource: t.resource, code: t.code }, t.count);
    },
  });
}
