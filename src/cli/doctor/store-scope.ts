/**
 * Whether the nodes that use a config's ranges can hand out one address twice (cni/node-local.ts):
 * a config served from a store of this node alone, while other nodes may serve it too, is how one
 * address reaches two pods. Held against the agent's store:
 * - a store the nodes share (kubernetes, etcd) keeps every range unique across them: whereabouts'
 *   store keys (`datastore`, `kubernetes`, `etcd_*`) are served by it;
 * - a per-node store while the Kubernetes source is on serves only node-local configs: any other
 *   is an error (the agent refuses its ADDs, code 7);
 * - a per-node store off Kubernetes serves what it is given: a config carrying whereabouts' store
 *   keys was written for ranges the nodes share, a warning.
 * Those keys are never reported as "accepted and ignored": what they asked for is either done or a
 * finding. Pure.
 *
 * A config naming WarrenPools (`ipam.pools`) is held against the pools the agent watches: a name
 * no pool has is an error (its pods' ADDs are refused, code 7); an agent that watches none (not on
 * the kubernetes store) is an error too, as it cannot serve such a config at all.
 */
import type { DoctorFacts } from '../../api/doctor.ts';
import { type IgnoredKey, isNodeLocal, perNodeRefusal, whereaboutsStoreKeys } from '../../cni/node-local.ts';
import { defined } from '../../core/defined.ts';
import type { WarrenConfigReading } from './conf-dir.ts';
import { type Finding, error, ok, warning } from './finding.ts';

type Parsed = Extract<WarrenConfigReading, { kind: 'parsed' }>;

/** The whereabouts keys of a reading that configure whereabouts itself and are not about its store. */
export function ignoredBesidesStore(reading: Parsed): IgnoredKey[] {
  const store = new Set(whereaboutsStoreKeys(reading.ignoredKeys));
  return reading.ignoredKeys.filter((k) => !store.has(k));
}

/** What doctor says of where a config's addresses are kept unique; see the module header. */
export function storeScopeFindings(
  where: string,
  file: string,
  reading: Parsed,
  facts: DoctorFacts | undefined,
): Finding[] {
  const storeKeys = whereaboutsStoreKeys(reading.ignoredKeys).map((k) => k.path);
  const keys = storeKeys.join(', ');
  const carries =
    storeKeys.length === 0 ? '' : `; it carries whereabouts' store keys (${keys}): it was written for shared ranges`;
  const mark = `set "node_local": true in the ipam section of ${file}`;
  if (facts === undefined) {
    if (storeKeys.length === 0) return [];
    return [
      warning(
        'whereabouts-store-keys',
        `${where} carries whereabouts' store keys (${keys})`,
        "whether the nodes share its ranges is the agent's --store, and the agent did not answer",
        'start the agent, then run `warren doctor` again',
      ),
    ];
  }
  const kind = facts.store.kind;
  if (kind !== 'sqlite') {
    if (storeKeys.length === 0) return [];
    return [
      ok(
        'whereabouts-store-keys-served',
        `${where}: whereabouts' store keys served by the ${kind} store`,
        `${keys}: the agents share this network's ranges through their ${kind} store, so no address goes to two ` +
          'nodes',
      ),
    ];
  }
  const derived = reading.pools === undefined ? undefined : facts.nodeLocalOnly?.derived;
  const served = {
    name: reading.network,
    ipam: {
      ...defined({ nodeLocal: reading.nodeLocal }),
      ranges: (reading.pools ?? []).map((pool) => ({ pool })),
    },
  };
  if (facts.nodeLocalOnly !== undefined) {
    const refusal = perNodeRefusal(served, derived);
    if (refusal === undefined) {
      const why = reading.nodeLocal === true ? 'marked "node_local": true' : "derived from this node's own pod CIDR";
      return [ok('config-node-local', `${where} is node-local (${why})`, "served from this node's own store")];
    }
    return [
      error(
        'config-not-node-local',
        `${where}: network ${reading.network} is not node-local, and the agent keeps addresses on this node alone ` +
          'under Kubernetes',
        `${refusal}${carries}; the agent refuses every ADD of it (code 7)`,
        'run the agents with --store kubernetes (the default with --kubernetes on: drop --store sqlite / ' +
          `WARREN_STORE=sqlite), or, if no other node uses its ranges, ${mark}`,
      ),
    ];
  }
  if (storeKeys.length === 0 || isNodeLocal(served, undefined)) return [];
  return [
    warning(
      'whereabouts-store-keys-per-node',
      `${where} was written for ranges the nodes share (${keys}), and the agent keeps addresses on this node alone`,
      `if another node's agent serves network ${reading.network} too, both hand out the same addresses`,
      'if other nodes use this network, run the agents on a shared store (--store kubernetes on Kubernetes, ' +
        `--store etcd elsewhere); if none does, ${mark}`,
    ),
  ];
}

/** What doctor says of the WarrenPools a config names, against those the agent watches. */
export function warrenPoolFindings(where: string, reading: Parsed, facts: DoctorFacts | undefined): Finding[] {
  const named = reading.warrenPools;
  if (named === undefined || facts === undefined) return [];
  const watched = facts.warrenPools;
  if (watched === undefined)
    return [
      error(
        'warren-pools-unserved',
        `${where} names WarrenPools (ipam.pools), and the agent does not read them`,
        `WarrenPools are read by an agent on the kubernetes store with the Kubernetes source on; this one runs on ` +
          `the ${facts.store.kind} store: every ADD of this network is refused (code 7)`,
        'run the agents with --store kubernetes --kubernetes on (the DaemonSet in deploy/), or give the config ' +
          'its ranges inline',
      ),
    ];
  if (!watched.listed) return [];
  const known = new Set(watched.names);
  const missing = named.filter((name) => !known.has(name));
  if (missing.length === 0) {
    if (named.length === 0) return [];
    return [ok('warren-pools-exist', `${where}: the WarrenPools it names exist`, named.join(', '))];
  }
  const one = missing.length === 1;
  return [
    error(
      'warren-pool-missing',
      `${where} names WarrenPool${one ? '' : 's'} that do${one ? 'es' : ''} not exist: ${missing.join(', ')}`,
      `pods of this network whose pod or namespace names no other pool (annotation warren.dev/pools) are refused ` +
        `(code 7); the cluster has ${watched.names.length === 0 ? 'no WarrenPools' : watched.names.join(', ')}`,
      `create the pool (kubectl apply a WarrenPool named ${missing[0]}), or correct ipam.pools`,
    ),
  ];
}
