/**
 * The lines of `warren status` that say what the agent costs its cluster store's server: its own
 * request rate to the Kubernetes API server and to etcd, each when it talks to one, told as `warren
 * doctor` tells them (doctor/kube-api-checks.ts, doctor/etcd-api-checks.ts).
 */
import type { AgentStatus } from '../api/status.ts';
import { describeEtcdRate } from './doctor/etcd-api-checks.ts';
import { describeApiRate } from './doctor/kube-api-checks.ts';
import { safe } from './format.ts';

export function requestRateLines(s: Pick<AgentStatus, 'kubeApi' | 'etcdApi'>): string[] {
  return [
    ...(s.kubeApi === undefined ? [] : [safe`kube api:    API requests: ${describeApiRate(s.kubeApi)}`]),
    ...(s.etcdApi === undefined ? [] : [safe`etcd api:    requests: ${describeEtcdRate(s.etcdApi)}`]),
  ];
}
