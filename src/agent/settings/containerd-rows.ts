/**
 * The rows of the settings table (settings/table.ts) of the containerd source: whether it is on,
 * where containerd listens and which namespaces to follow, how long a new allocation is spared by
 * a resync, and how a failed container event is retried.
 */
import { DEFAULT_CONTAINERD_SOCKET } from '../../sources/containerd/socket.ts';
import * as read from './readers.ts';
import type { Row } from './row.ts';

export const CONTAINERD_ROWS = {
  containerd: {
    flag: 'containerd',
    env: 'WARREN_CONTAINERD',
    about: 'on: release what containers deleted in containerd held, or off',
    default: 'on',
    read: read.onOff,
  },
  containerdSocket: {
    flag: 'containerd-socket',
    env: 'WARREN_CONTAINERD_SOCKET',
    about: "containerd's gRPC socket",
    default: DEFAULT_CONTAINERD_SOCKET,
    read: read.path,
  },
  containerdNamespaces: {
    flag: 'containerd-namespaces',
    env: 'WARREN_CONTAINERD_NAMESPACES',
    about: 'comma-separated containerd namespaces to follow',
    default: 'k8s.io',
    read: read.containerdNamespaces,
  },
  containerdGraceSeconds: {
    flag: 'containerd-grace',
    env: 'WARREN_CONTAINERD_GRACE',
    about: 'seconds a new allocation is spared by a resync with containerd',
    default: '60',
    read: read.seconds(0),
  },
  eventRetrySeconds: {
    flag: 'event-retry',
    env: 'WARREN_EVENT_RETRY',
    about: 'seconds before a failed container event is retried, doubling each time',
    default: '1',
    read: read.seconds(0.01),
  },
  eventRetryMaxSeconds: {
    flag: 'event-retry-max',
    env: 'WARREN_EVENT_RETRY_MAX',
    about: 'longest wait between retries of a failed container event, seconds',
    default: '300',
    read: read.seconds(0.01),
  },
} satisfies Record<string, Row<unknown>>;
