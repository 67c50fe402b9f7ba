/**
 * Default locations (DESIGN.md "Defaults"). Kept in a file of their own so the CNI plugin can
 * learn the default socket without loading anything else.
 */
export const DEFAULT_STATE_DIR = '/var/lib/warren';
export const DEFAULT_SOCKET = '/run/warren/warren.sock';
/**
 * Where the plugin writes missed DELs unless a network config names `ipam.journal_dir` (or
 * WARREN_JOURNAL_DIR is set in the runtime's environment), and so where a root agent reads them
 * whatever its --state-dir: the plugin cannot know the agent's flags.
 */
export const DEFAULT_JOURNAL_DIR = '/var/lib/warren/journal';
/**
 * Network namespace directories judged by default: podman's spelling and iproute2's and
 * containerd CRI's. Where /var/run links to /run (nearly everywhere) they are one directory, and
 * the observer compares real paths, so either covers a namespace recorded under the other; both
 * are listed for the hosts where they are not the same.
 */
export const DEFAULT_NETNS_DIRS: readonly string[] = ['/run/netns', '/var/run/netns'];
export const DEFAULT_CNI_CONF_DIR = '/etc/cni/net.d';
export const DEFAULT_CNI_BIN_DIR = '/opt/cni/bin';
export const DEFAULT_PLUGINS_DIR = '/run/warren/plugins';
/** Where containerd listens for gRPC by default. */
export const DEFAULT_CONTAINERD_SOCKET = '/run/containerd/containerd.sock';
