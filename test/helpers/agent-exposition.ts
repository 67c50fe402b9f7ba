/**
 * What an agent's /metrics shows, for the tests that hold deploy/ to it (the Grafana dashboard,
 * the alert rules): AgentMetrics' own exposition, built in process as the agent builds it (process
 * metrics on), fed one of each event and read with stubbed readings that include blocks, so every
 * series an agent can show is there, then parsed by the Prometheus project's parser.
 */
import { AgentMetrics } from '../../src/agent/metrics/prometheus.ts';
import { ManualClock } from '../../src/core/clock.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { ApiRequestCounter } from '../../src/store/kubernetes/api-requests.ts';
import { EtcdRequestCounter } from '../../src/store/etcd-tier/etcd-requests.ts';
import { parseExposition } from './prometheus.ts';

export interface AgentExposition {
  /** Sample name as exposed (`_bucket`, `_total` and all) → the label names its series carry. */
  readonly exposed: Map<string, Set<string>>;
  /** Family names Warren defines itself (not the process and Node.js ones). */
  readonly warrenFamilies: string[];
}

export async function agentExposition(): Promise<AgentExposition> {
  // The agent's requests to the Kubernetes API server: one LIST answered.
  const kubeRequests = new ApiRequestCounter(new ManualClock(0));
  kubeRequests.count({ verb: 'list', resource: 'warrenblocks' }, 200);
  // And to etcd (an agent has one or the other: both here, so every family is shown).
  const etcdRequests = new EtcdRequestCounter(new ManualClock(0));
  etcdRequests.count('range');
  const metrics = new AgentMetrics({
    version: '0.0.0-test',
    kubeRequests,
    etcdRequests,
    readings: {
      pools: async () => [
        { pool: '10.0.0.0/24', capacity: 254, allocated: 3, resting: 1, blocks: { owned: 2, borrowed: 1 } },
      ],
      journal: () => ({ pending: 1, setAside: 1 }),
      queueDepth: () => ({ journal: 1, containerd: 0 }),
      ready: async () => true,
      bookkeeping: async () => ({ lent: 1 }),
      // The kubernetes store's WarrenPools, as their status shows them.
      warrenPools: () => [{ name: 'gold', capacity: 254, used: 3 }],
    },
  });
  const allocation: Allocation = {
    pool: '10.0.0.0/24',
    address: '10.0.0.2',
    network: 'net',
    containerID: 'c',
    ifname: 'eth0',
    node: 'n',
    createdAt: 0,
  };
  metrics.cniCall('ADD', 0, 0.001);
  metrics.cniCall('DEL', 11, 0.002);
  metrics.cniFailed({ command: 'DEL', code: 11, network: 'net-a', message: 'try again', containerID: 'c1' });
  metrics.allocated([allocation]);
  metrics.released('cni-del', [allocation]);
  metrics.commit(0.001, 'committed');
  metrics.commit(0.004, 'conflict');
  metrics.commit(0.1, 'error');
  metrics.retried('journal');
  metrics.audited({ healthy: 1, stale: 1, suspect: 1 });
  const families = parseExposition(await metrics.exposition());
  const exposed = new Map<string, Set<string>>();
  for (const s of families.flatMap((f) => f.samples)) {
    const labels = exposed.get(s.name) ?? new Set<string>();
    for (const l of Object.keys(s.labels)) labels.add(l);
    exposed.set(s.name, labels);
  }
  const warrenFamilies = families
    .map((f) => f.name)
    .filter((n) => !n.startsWith('warren_process_') && !n.startsWith('warren_nodejs_'));
  return { exposed, warrenFamilies };
}
