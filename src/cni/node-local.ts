/**
 * Which network configs a per-node store may serve under Kubernetes (README "Stores"). A store of
 * one node (SQLite) knows nothing of the other nodes' addresses: a config whose ranges other nodes
 * use too (a whereabouts config in a NetworkAttachmentDefinition, the commonest) would have each
 * node hand out the same addresses. Where the agent cannot know that no other node uses a range —
 * the Kubernetes source is on, so this is one node of a cluster — a per-node store serves only
 * configs that are node-local:
 * - the config the agent derived from the node's own primary config when that took over host-local
 *   (the node's own pod CIDR: node-local by construction), with exactly its ranges;
 * - a config the operator marked `"node_local": true` in its IPAM section.
 * Any other is refused on ADD (INVALID_CONFIG, CNI code 7) naming both fixes, and `warren doctor`
 * flags it as an error. Pure: the caller says what it knows.
 *
 * Whereabouts' store keys (`datastore`, `kubernetes`, `etcd_*`) say a config was written for
 * ranges shared by nodes: on a cluster store they are served by it; on a per-node store they are
 * what this rule refuses under Kubernetes, and a warning elsewhere (`whereaboutsStoreKeys`).
 */
import type { IgnoredKey } from './ipam-config.ts';
import { WHEREABOUTS_STORE_KEYS } from './whereabouts-keys.ts';

export type { IgnoredKey };
export { WHEREABOUTS_STORE_KEYS };

/** A config known to be node-local by construction: its network and the range pools it holds. */
export interface NodeLocalConfig {
  readonly network: string;
  readonly pools: readonly string[];
}

/** What the rule reads of a parsed network config. */
export interface ServedConfig {
  readonly name: string;
  readonly ipam: { readonly nodeLocal?: true; readonly ranges: readonly { readonly pool: string }[] };
}

/** The keys of `ignored` that are whereabouts' store keys (see the module header). */
export function whereaboutsStoreKeys(ignored: readonly IgnoredKey[]): IgnoredKey[] {
  return ignored.filter((k) => WHEREABOUTS_STORE_KEYS.has(k.path.slice(k.path.lastIndexOf('.') + 1)));
}

/** Whether `conf` is node-local: marked so, or exactly the config derived from the node's own CIDR. */
export function isNodeLocal(conf: ServedConfig, derived: NodeLocalConfig | undefined): boolean {
  if (conf.ipam.nodeLocal === true) return true;
  if (derived === undefined || derived.network !== conf.name) return false;
  const own = new Set(derived.pools);
  // A config naming WarrenPools has no ranges of its own: pools are the cluster's, never node-local.
  return conf.ipam.ranges.length > 0 && conf.ipam.ranges.every((range) => own.has(range.pool));
}

/**
 * Why a per-node store must not serve `conf` under Kubernetes (the message of the refusal), or
 * undefined when it may: it is node-local.
 */
export function perNodeRefusal(conf: ServedConfig, derived: NodeLocalConfig | undefined): string | undefined {
  if (isNodeLocal(conf, derived)) return undefined;
  return (
    `network ${conf.name} is not node-local, and this agent keeps addresses on this node alone (--store sqlite) ` +
    'while the Kubernetes source is on: other nodes may use its ranges too, and two nodes would hand out one ' +
    'address. Run the agents with --store kubernetes (ranges shared by the nodes), or, if no other node uses ' +
    `these ranges, mark the config "node_local": true in its ipam section`
  );
}
