/**
 * Default locations (DESIGN.md "Defaults"). Kept in a file of their own so the CNI plugin can
 * learn the default socket without loading anything else.
 */
export const DEFAULT_STATE_DIR = '/var/lib/warren';
export const DEFAULT_SOCKET = '/run/warren/warren.sock';
export const DEFAULT_JOURNAL_DIR = '/var/lib/warren/journal';
export const DEFAULT_NETNS_DIR = '/var/run/netns';
export const DEFAULT_CNI_CONF_DIR = '/etc/cni/net.d';
export const DEFAULT_CNI_BIN_DIR = '/opt/cni/bin';
export const DEFAULT_PLUGINS_DIR = '/run/warren/plugins';
/** Where containerd listens for gRPC by default. */
export const DEFAULT_CONTAINERD_SOCKET = '/run/containerd/containerd.sock';
