/**
 * `warren_etcd_requests_total{kind}`: the agent's own requests to etcd on the etcd store, read at
 * each scrape from the one counter its client reports to (store/etcd-tier/etcd-requests.ts), so the
 * metric is never a second count that could drift; the sibling of `warren_kube_api_requests_total`
 * (kube-requests.ts). Cardinality is bounded: kinds are etcd's own API's.
 */
import { Counter, type Registry } from 'prom-client';
import type { EtcdRequestCounter } from '../../store/etcd-tier/etcd-requests.ts';

export function registerEtcdRequests(registry: Registry, requests: EtcdRequestCounter): void {
  new Counter({
    name: 'warren_etcd_requests_total',
    help:
      'Requests the agent sent to etcd, by kind (range, put, txn, delete, lease-grant, lease-revoke, ' +
      'lease-keepalive, watch-create, watch-cancel...): one per message sent, as etcd counts them.',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      for (const t of requests.totals()) this.inc({ kind: t.kind }, t.count);
    },
  });
}
