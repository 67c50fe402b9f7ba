/**
 * The rows of the settings table (settings/table.ts) of the node's CNI config (agent/node/): whether
 * the agent writes Warren's config into the conf dir, which primary it derives it from and how
 * long it waits for one, the readiness indicator, the newest cniVersion the runtime accepts, and
 * whether the config goes when the agent stops.
 */
import * as read from './readers.ts';
import type { Row } from './row.ts';

/** Where runtimes look for CNI configs unless told otherwise. */
export const DEFAULT_CNI_CONF_DIR = '/etc/cni/net.d';

export const CNI_CONFIG_ROWS = {
  manageCniConfig: {
    flag: 'manage-cni-config',
    env: 'WARREN_MANAGE_CNI_CONFIG',
    about:
      "on: write Warren's config into the CNI conf dir, derived from the node's primary config and kept in step " +
      'with it, or off',
    default: 'off',
    read: read.onOff,
  },
  cniConfDir: {
    flag: 'cni-conf-dir',
    env: 'WARREN_CNI_CONF_DIR',
    about: "the runtime's CNI conf dir",
    default: DEFAULT_CNI_CONF_DIR,
    read: read.path,
  },
  primaryConfig: {
    flag: 'primary-config',
    env: 'WARREN_PRIMARY_CONFIG',
    about:
      'the primary CNI config to derive from (a path, or a name in the conf dir); without it, the lexically ' +
      "first config that is not Warren's",
    read: read.verbatim,
  },
  primaryWaitSeconds: {
    flag: 'primary-wait',
    env: 'WARREN_PRIMARY_WAIT',
    about: 'seconds to wait for a primary config before reporting there is none',
    default: '300',
    read: read.seconds(0),
  },
  readinessIndicatorFile: {
    flag: 'readiness-indicator-file',
    env: 'WARREN_READINESS_INDICATOR_FILE',
    about:
      "while this file is missing the agent is not ready (CNI STATUS 50, ADD 11); Warren's config stays first " +
      '(fails closed)',
    read: read.path,
  },
  cniVersionMax: {
    flag: 'cni-version-max',
    env: 'WARREN_CNI_VERSION_MAX',
    about: "newest cniVersion the runtime accepts (containerd 1.6 and 1.7: 1.0.0); Warren's config is capped at it",
    default: '1.0.0',
    read: read.cniVersion,
  },
  cleanupConfigOnExit: {
    flag: 'cleanup-config-on-exit',
    env: 'WARREN_CLEANUP_CONFIG_ON_EXIT',
    about:
      "on: remove Warren's config when the agent stops cleanly and holds no address of its network (else it " +
      'stays; `warren uninstall` hands a node back), or off',
    default: 'off',
    read: read.onOff,
  },
} satisfies Record<string, Row<unknown>>;
