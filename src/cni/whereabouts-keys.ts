/**
 * Whereabouts' keys that configure whereabouts itself (its datastore, leader election, flat file,
 * reconciler, logging): read from its pkg/types, past and present. Warren accepts them so configs
 * move over unchanged, checks their values loosely (as whereabouts' Go decoder would), and reports
 * them as ignored, with why, so the agent can say once that they do nothing here.
 */
import { WarrenError } from '../core/errors.ts';
import {
  describe,
  invalid,
  isPlainObject,
  optionalBoolean,
  optionalString,
  refuseUnknownKeys,
  stringAt,
} from './config-values.ts';

/** How an ignored key's value is checked: loosely, as whereabouts' Go decoder would. */
export type ValueCheck = 'string' | 'secret' | 'boolean' | 'integer' | 'kubernetes';

// Not "ignored" in effect: whether nodes share a range is the agent's store, and on a per-node store
// under Kubernetes a config carrying these keys is refused unless marked node-local (cni/node-local.ts).
const STORE_REASON =
  "whereabouts' own datastore; whether the nodes share the range is the agent's store (--store kubernetes or etcd)";
const LEADER_REASON = "whereabouts' leader election; Warren's store commits are optimistic and need none";
const LOG_REASON = 'Warren logs through the agent';

/**
 * Keys whereabouts reads (pkg/types/types.go, past and present) that configure whereabouts
 * itself. Accepted so configs move over, checked for type, reported in `ignoredKeys`.
 */
export const IGNORED_KEYS: ReadonlyMap<string, { readonly check: ValueCheck; readonly reason: string }> = new Map([
  ['datastore', { check: 'string', reason: STORE_REASON }],
  ['etcd_host', { check: 'string', reason: STORE_REASON }],
  ['etcd_username', { check: 'string', reason: STORE_REASON }],
  ['etcd_password', { check: 'secret', reason: STORE_REASON }],
  ['etcd_key_file', { check: 'string', reason: STORE_REASON }],
  ['etcd_cert_file', { check: 'string', reason: STORE_REASON }],
  ['etcd_ca_cert_file', { check: 'string', reason: STORE_REASON }],
  ['kubernetes', { check: 'kubernetes', reason: STORE_REASON }],
  [
    'configuration_path',
    {
      check: 'string',
      reason: "whereabouts' flat-file config; Warren does not read it, so keys set only there do not apply",
    },
  ],
  ['leader_lease_duration', { check: 'integer', reason: LEADER_REASON }],
  ['leader_renew_deadline', { check: 'integer', reason: LEADER_REASON }],
  ['leader_retry_period', { check: 'integer', reason: LEADER_REASON }],
  ['optimistic_ipam', { check: 'boolean', reason: LEADER_REASON }],
  [
    'reconciler_cron_expression',
    { check: 'string', reason: "whereabouts' reconciler schedule; the agent reconciles continuously" },
  ],
  ['sleep_for_race', { check: 'integer', reason: 'a whereabouts debugging delay' }],
  [
    'node_slice_size',
    { check: 'string', reason: "whereabouts' per-node slices; Warren sizes its per-node blocks with block_size" },
  ],
  ['log_file', { check: 'string', reason: LOG_REASON }],
  ['log_level', { check: 'string', reason: LOG_REASON }],
]);

/** The ignored keys that say where whereabouts keeps addresses: a config written for ranges nodes share. */
export const WHEREABOUTS_STORE_KEYS: ReadonlySet<string> = new Set(
  [...IGNORED_KEYS].filter(([, key]) => key.reason === STORE_REASON).map(([name]) => name),
);

const KUBERNETES_KEYS: ReadonlySet<string> = new Set(['kubeconfig', 'k8s_api_root']);

/** Checks the value of a key Warren ignores: loosely, and `null` passes as Go's decoder lets it. */
export function checkIgnored(value: unknown, check: ValueCheck, path: string): void {
  if (value === null) return;
  switch (check) {
    case 'string':
      stringAt(value, path);
      return;
    case 'secret':
      // Never echo the value: a password in the wrong place is still a password.
      if (typeof value !== 'string') throw invalid(path, 'must be a string (the value is not shown)');
      return;
    case 'boolean':
      optionalBoolean(value, path);
      return;
    case 'integer':
      if (typeof value !== 'number' || !Number.isSafeInteger(value))
        throw invalid(path, `must be a whole number, got ${describe(value)}`);
      return;
    case 'kubernetes':
      if (!isPlainObject(value)) throw invalid(path, `must be an object, got ${describe(value)}`);
      refuseUnknownKeys(value, KUBERNETES_KEYS, path);
      for (const key of KUBERNETES_KEYS) if (value[key] !== null) optionalString(value[key], `${path}.${key}`);
      return;
    default: {
      const never: never = check;
      throw new WarrenError('INVALID_CONFIG', `unhandled check ${String(never)}`);
    }
  }
}
