/**
 * The agent's options: what its settings (settings/table.ts, one row each: flag, environment
 * variable, help, default, reader) come to once read and checked. Their type is derived from the
 * rows, so a setting is stated once. A flag wins over its variable, the variable over the default;
 * each bad value is refused with an INVALID_CONFIG that names the flag and the variable. Paths are
 * made absolute against the working directory.
 */
import { WarrenError } from '../../core/errors.ts';
import { type DefaultContext, type Row, readRow } from './row.ts';
import { SETTINGS, SETTING_KEYS, type SettingKey, type Table } from './table.ts';

/** The value a setting's reader gives; undefined where it leaves the option out. */
type ValueOf<K extends SettingKey> = ReturnType<Table[K]['read']>;

/** A setting the options always hold: it has a default or an unset value, and its reader never leaves it out. */
type Held<K extends SettingKey> = Table[K] extends { readonly default: unknown } | { readonly unset: unknown }
  ? undefined extends ValueOf<K>
    ? never
    : K
  : never;
type HeldKey = { [K in SettingKey]: Held<K> }[SettingKey];

/** The options as derived: a setting they always hold is required, the others optional. */
type Derived = { readonly [K in HeldKey]: ValueOf<K> } & {
  readonly [K in Exclude<SettingKey, HeldKey>]?: Exclude<ValueOf<K>, undefined>;
};

/** The agent's options, one per row of the settings table (whose `about` says what each is). */
export type AgentOptions = { readonly [K in keyof Derived]: Derived[K] };

/** Settings as flags give them: text by option key. */
export type AgentFlags = Partial<Record<SettingKey, string>>;

/**
 * Reads every setting from `flags`, then `env`, then its default; `uid` and `cwd` choose the
 * defaults (root's system paths, or a user's state directory) and anchor relative paths.
 */
export function resolveAgentOptions(
  flags: AgentFlags,
  env: NodeJS.ProcessEnv = process.env,
  uid: number = process.getuid?.() ?? 0,
  cwd: string = process.cwd(),
): AgentOptions {
  const values = new Map<SettingKey, unknown>();
  // Each setting is read once, when first asked: the defaults that live in the state directory or
  // beside the socket ask for those, whatever the order of the rows.
  const read = (key: SettingKey): unknown => {
    if (!values.has(key)) values.set(key, readRow(SETTINGS[key] as Row<unknown>, flags[key], context));
    return values.get(key);
  };
  const held = <K extends HeldKey>(key: K): ValueOf<K> => read(key) as ValueOf<K>;
  const context: DefaultContext = {
    uid,
    env,
    cwd,
    stateDir: () => held('stateDir'),
    socket: () => held('socket'),
    kubernetes: () => held('kubernetes'),
    store: () => held('store'),
  };
  for (const key of SETTING_KEYS) read(key);
  // The rules between settings.
  if (held('store') === 'etcd' && held('etcdEndpoints').length === 0) {
    throw new WarrenError(
      'INVALID_CONFIG',
      '--store etcd needs --etcd-endpoints / WARREN_ETCD_ENDPOINTS (comma-separated client URLs)',
    );
  }
  const [retry, retryMax] = [held('eventRetrySeconds'), held('eventRetryMaxSeconds')];
  if (retryMax < retry) {
    throw new WarrenError('INVALID_CONFIG', `--event-retry-max (${retryMax}) is shorter than --event-retry (${retry})`);
  }
  // An option left out is absent, not undefined.
  return Object.fromEntries([...values].filter(([, value]) => value !== undefined)) as AgentOptions;
}
