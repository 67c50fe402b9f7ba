/**
 * Agent settings: each one row of one table (`SETTINGS`), its only home: option key, flag,
 * environment variable, help, default and reader (settings/readers.ts). `--help` is made of the
 * rows, the agent's options type is derived from them, and `resolveAgentOptions` walks them
 * (settings/options.ts).
 *
 * The rows are written by group, each group in a file of its own; this file joins them into the
 * one table, in the order --help lists them:
 * - node-rows.ts: state directory, socket (and `agentSocket`, the socket's rule the CLI shares),
 *   database, node name, durability, log level, journal;
 * - reconcile-rows.ts: the reconcile passes and the namespaces they judge by;
 * - store-rows.ts: the store, how to reach it, and the chores on a shared one;
 * - containerd-rows.ts and kubernetes-rows.ts: the two sources of container and pod lifecycles;
 * - cni-call-rows.ts: how CNI calls are answered (warm-up, GC, database busy timeout);
 * - cni-config-rows.ts: the node's CNI config, managed by the agent;
 * - serving-rows.ts: the plugin registry, the HTTP endpoints and the node's liveness lease.
 */
import { type Row, givenText, helpOf } from './row.ts';
import { CNI_CALL_ROWS } from './cni-call-rows.ts';
import { CNI_CONFIG_ROWS } from './cni-config-rows.ts';
import { CONTAINERD_ROWS } from './containerd-rows.ts';
import { KUBERNETES_ROWS } from './kubernetes-rows.ts';
import { NODE_ROWS } from './node-rows.ts';
import { RECONCILE_ROWS } from './reconcile-rows.ts';
import { SERVING_ROWS } from './serving-rows.ts';
import { SHARED_STORE_CHORE_ROWS, STORE_ROWS } from './store-rows.ts';

export { agentSocket } from './node-rows.ts';
export { DEFAULT_CNI_CONF_DIR } from './cni-config-rows.ts';
export { DEFAULT_METRICS_ADDRESS } from './serving-rows.ts';

/** The rows, in the order --help lists them; a row's key is the option's. */
const TABLE = {
  ...NODE_ROWS,
  ...RECONCILE_ROWS,
  ...STORE_ROWS,
  ...SHARED_STORE_CHORE_ROWS,
  ...CONTAINERD_ROWS,
  ...KUBERNETES_ROWS,
  ...CNI_CALL_ROWS,
  ...CNI_CONFIG_ROWS,
  ...SERVING_ROWS,
} satisfies Record<string, Row<unknown>>;

/** The table's type: what settings/options.ts derives the options type from. */
export type Table = typeof TABLE;

/** The option key of every setting. */
export type SettingKey = keyof Table;

/** Every setting, in the order --help lists them, each with its help line. */
export const SETTINGS = Object.fromEntries(
  Object.entries(TABLE).map(([key, spec]) => [key, { ...spec, help: helpOf(spec) }]),
) as { readonly [K in SettingKey]: Table[K] & { readonly help: string } };

/** The option keys in the table's order. */
export const SETTING_KEYS = Object.keys(TABLE) as SettingKey[];

/** The text a flag or the environment gives a setting; undefined when neither does. */
export function givenSetting(
  key: SettingKey,
  flags: Partial<Record<SettingKey, string>>,
  env: NodeJS.ProcessEnv,
): string | undefined {
  return givenText(SETTINGS[key], flags[key], env);
}
