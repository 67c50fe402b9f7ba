/**
 * The rows of the settings table (settings/table.ts) of the Kubernetes source: whether it is on,
 * its credentials (and, beside them, the namespace of the Kubernetes store's Leases,
 * settings/store-rows.ts), how long a gone pod or a StatefulSet ordinal keeps its addresses, and
 * how often a gone pod's release is retried before it is reported.
 */
import { DEFAULT_MAX_RETRIES } from '../../core/rate-limited-queue.ts';
import * as read from './readers.ts';
import type { Row } from './row.ts';
import { KUBE_NAMESPACE_ROW } from './store-rows.ts';

export const KUBERNETES_ROWS = {
  kubernetes: {
    flag: 'kubernetes',
    env: 'WARREN_KUBERNETES',
    about: "on: watch this node's pods in Kubernetes and release what gone pods held (Events on the pod), or off",
    default: 'off',
    read: read.onOff,
  },
  kubeconfig: {
    flag: 'kubeconfig',
    env: 'WARREN_KUBECONFIG',
    about: 'kubeconfig file for --kubernetes on and --store kubernetes; without it, the in-cluster service account',
    read: read.path,
  },
  ...KUBE_NAMESPACE_ROW,
  podGoneGraceSeconds: {
    flag: 'pod-gone-grace',
    env: 'WARREN_POD_GONE_GRACE',
    about:
      'seconds a gone pod keeps its addresses while its network namespace cannot be proven gone ' +
      "(a force-deleted pod's sandbox may still run)",
    default: '600',
    read: read.seconds(0),
  },
  stickyReleaseGraceSeconds: {
    flag: 'sticky-release-grace',
    env: 'WARREN_STICKY_RELEASE_GRACE',
    about:
      "seconds a StatefulSet ordinal's sticky address is kept after the StatefulSet stops covering the " +
      'ordinal (scaled below it, or deleted), so a scale-down undone in time keeps it',
    default: '300',
    read: read.seconds(0),
  },
  podReleaseRetries: {
    flag: 'pod-release-retries',
    env: 'WARREN_POD_RELEASE_RETRIES',
    about: "retries of a gone pod's release before a Warning Event on it",
    // The work queue's own default (core cannot read this table), so the two cannot differ.
    default: String(DEFAULT_MAX_RETRIES),
    read: read.wholeNumber(100),
  },
} satisfies Record<string, Row<unknown>>;
