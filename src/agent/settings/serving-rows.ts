/**
 * The rows of the settings table (settings/table.ts) of what the agent offers beside its socket:
 * the registry where plugins announce themselves, the HTTP endpoints (health, metrics, dashboard),
 * and how long its node stays listed alive once it stops.
 */
import { dirname, join } from 'node:path';
import { DEFAULT_SOCKET } from '../../api/socket.ts';
import { DEFAULT_PING_SECONDS } from '../../store/kubernetes/lease-ping.ts';
import { agentSocket } from './node-rows.ts';
import * as read from './readers.ts';
import type { Row } from './row.ts';

/** The default metrics address: loopback only, Prometheus' node-agent port range. */
export const DEFAULT_METRICS_ADDRESS = '127.0.0.1:9464';

export const SERVING_ROWS = {
  pluginsDir: {
    flag: 'plugins-dir',
    env: 'WARREN_PLUGINS_DIR',
    about:
      'directory, watched recursively, where plugins such as runtime adapters register with a unix socket ' +
      "(kubelet's handshake); empty turns the registry off",
    default: {
      says: `plugins beside the agent socket (${join(dirname(DEFAULT_SOCKET), 'plugins')} as root)`,
      // Beside the socket actually used: a private socket gets a private registry.
      of: (c) => pluginsDirBeside(c.socket?.() ?? agentSocket(undefined, c)),
    },
    emptyIsAValue: true,
    read: read.directoryOrOff,
  },
  metricsAddress: {
    flag: 'metrics-address',
    env: 'WARREN_METRICS_ADDRESS',
    about:
      'host:port where the health endpoints (/livez, /readyz), Prometheus metrics (/metrics) and the dashboard (/) ' +
      'are served over HTTP, apart from the socket ([::1]:9464 for IPv6; port 0 picks a free one); empty turns all ' +
      'of them off',
    default: DEFAULT_METRICS_ADDRESS,
    emptyIsAValue: true,
    read: read.listenAddressOrOff,
  },
  nodeLeaseSeconds: {
    flag: 'node-lease',
    env: 'WARREN_NODE_LEASE',
    about:
      "seconds a stopped agent's node stays listed alive (etcd lease TTL), or the Kubernetes Lease's duration: " +
      'written at announce and, only while the node holds a cluster chore, again each third of it (one write per ' +
      '100 s by default); an idle node writes nothing, and a lapsed Lease is pinged (--node-ping)',
    default: {
      says: '300 with --store kubernetes, 10 otherwise',
      of: (c) => (c.store?.() === 'kubernetes' ? '300' : '10'),
    },
    read: read.seconds(2),
  },
  nodePingSeconds: {
    flag: 'node-ping',
    env: 'WARREN_NODE_PING',
    about:
      'seconds an agent has to answer a ping on its Kubernetes Lease (kubernetes store): a node whose Lease lapsed ' +
      'is asked before its name is taken over or its blocks freed, and counts as gone only when it does not answer',
    default: String(DEFAULT_PING_SECONDS),
    read: read.seconds(1),
  },
} satisfies Record<string, Row<unknown>>;

/** The plugins directory that goes with an agent socket: `plugins` beside it. */
function pluginsDirBeside(socket: string): string {
  return join(dirname(socket), 'plugins');
}
