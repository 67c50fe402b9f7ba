/**
 * WarrenPools as a network config names them (cni/ipam-config.ts `pools`): what a pool's name may
 * be (a Kubernetes object's, a DNS subdomain), the list a config gives (each name once), and the
 * network_name prefix that is the pools' own, so no config can take a pool's addresses by naming
 * its network.
 */
import { invalid, quoted, stringListAt } from './config-values.ts';

/**
 * The network_name prefix of a WarrenPool's ranges (`warrenpool:<pool>`): pool keys derive from the
 * pool, so every network naming it shares its addresses. A config may not take such a name itself.
 */
export const POOL_NETWORK_PREFIX = 'warrenpool:';

/** A WarrenPool's name, as Kubernetes allows an object's (a DNS subdomain). */
const POOL_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Whether `name` can name a WarrenPool (a DNS subdomain of at most 253 characters). */
export function isPoolName(name: string): boolean {
  return name.length <= 253 && POOL_NAME.test(name);
}

/** `pools`: WarrenPool names, each once; empty means the pod or its namespace must name them. */
export function parsePools(value: unknown, path: string): string[] {
  const names = stringListAt(value, path);
  names.forEach((name, i) => {
    if (!isPoolName(name))
      throw invalid(`${path}[${i}]`, `${quoted(name)} is not a WarrenPool name (lower-case letters, digits, "-", ".")`);
    if (names.indexOf(name) !== i) throw invalid(`${path}[${i}]`, `${quoted(name)} is listed twice`);
  });
  return names;
}
