/**
 * The network configuration a runtime hands a plugin on stdin: cniVersion, name, the ipam section,
 * runtimeConfig, prevResult and (for GC) cni.dev/valid-attachments. Only the parts Warren uses are
 * validated strictly; the rest of the object belongs to the main plugin.
 */
import { WarrenError } from '../core/errors.ts';
import { isPlainObject, textOf } from '../core/validate.ts';
import { type IPAddress, parseCidr, parseIP } from '../ipam/address.ts';
import { invalid } from './config-values.ts';
import { type IpamConfig, parseIpamConfig } from './ipam-config.ts';
import {
  type CniCommand,
  type CniVersion,
  COMMAND_SINCE,
  SUPPORTED_VERSIONS,
  compareVersions,
  isSupportedVersion,
} from './spec.ts';
import { isValidNetworkName, printable } from './args.ts';

export interface Attachment {
  readonly containerID: string;
  readonly ifname: string;
}

export interface NetConf {
  readonly cniVersion: CniVersion;
  readonly name: string;
  readonly ipam: IpamConfig;
  /** Addresses asked for through the `ips` capability (runtimeConfig.ips or args.cni.ips). */
  readonly requested: readonly IPAddress[];
  /** Addresses in prevResult, when given (CHECK, DEL). */
  readonly previousIPs?: readonly IPAddress[];
  /** GC only: the attachments that must keep their addresses. */
  readonly validAttachments?: readonly Attachment[];
  /**
   * The config's top-level `"allowPersistentIPs": true` (the key KubeVirt's ipam-extensions reads
   * from a NAD to give its VMs IPAMClaims); only `true` counts, anything else is the main plugin's.
   */
  readonly allowPersistentIPs?: true;
}

/** The config's cniVersion, when it has a usable one (to answer errors in the right version). */
export function declaredVersion(raw: unknown): CniVersion | undefined {
  if (!isPlainObject(raw) || typeof raw.cniVersion !== 'string') return undefined;
  return isSupportedVersion(raw.cniVersion) ? raw.cniVersion : undefined;
}

export function parseNetConf(raw: unknown, command: CniCommand): NetConf {
  if (!isPlainObject(raw)) throw new WarrenError('INVALID_CONFIG', 'network config must be a JSON object');
  const version = raw.cniVersion;
  if (typeof version !== 'string' || version === '') throw invalid('cniVersion', 'missing or not a string');
  if (!isSupportedVersion(version)) {
    throw new WarrenError(
      'INCOMPATIBLE_VERSION',
      `cniVersion "${printable(version)}" is not supported; Warren speaks ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  if (compareVersions(version, COMMAND_SINCE[command]) < 0) {
    throw new WarrenError(
      'INCOMPATIBLE_VERSION',
      `${command} needs cniVersion ${COMMAND_SINCE[command]} or later; the config says ${version}`,
    );
  }
  if (typeof raw.name !== 'string' || !isValidNetworkName(raw.name)) {
    throw invalid(
      'name',
      raw.name === undefined
        ? 'missing'
        : `"${printable(textOf(raw.name))}" must be letters, digits, "_", "." or "-", starting with a letter or digit`,
    );
  }
  if (raw.ipam === undefined) throw invalid('ipam', 'missing');
  const ipam = parseIpamConfig(raw.ipam);
  const requested: IPAddress[] = [];
  const collect = (list: unknown, path: string): void => {
    if (list === undefined) return;
    if (!Array.isArray(list)) throw invalid(path, 'must be a list of addresses');
    list.forEach((item, i) => {
      const ip = typeof item === 'string' ? addressPart(item) : undefined;
      if (ip === undefined) throw invalid(`${path}[${i}]`, `"${printable(textOf(item))}" is not an IP address or CIDR`);
      requested.push(ip);
    });
  };
  if (raw.runtimeConfig !== undefined) {
    if (!isPlainObject(raw.runtimeConfig)) throw invalid('runtimeConfig', 'must be an object');
    collect(raw.runtimeConfig.ips, 'runtimeConfig.ips');
  }
  if (isPlainObject(raw.args) && isPlainObject(raw.args.cni)) collect(raw.args.cni.ips, 'args.cni.ips');

  const conf: { -readonly [K in keyof NetConf]: NetConf[K] } = { cniVersion: version, name: raw.name, ipam, requested };
  if (raw.prevResult !== undefined) conf.previousIPs = previousIPs(raw.prevResult);
  if (command === 'GC') conf.validAttachments = attachments(raw['cni.dev/valid-attachments']);
  if (raw.allowPersistentIPs === true) conf.allowPersistentIPs = true;
  return conf;
}

function addressPart(text: string): IPAddress | undefined {
  if (text.includes('/')) return parseCidr(text)?.address;
  return parseIP(text);
}

function previousIPs(prev: unknown): IPAddress[] {
  if (!isPlainObject(prev)) throw invalid('prevResult', 'must be an object');
  const ips = prev.ips ?? [];
  if (!Array.isArray(ips)) throw invalid('prevResult.ips', 'must be a list');
  return ips.map((item, i) => {
    const address =
      isPlainObject(item) && typeof item.address === 'string' ? parseCidr(item.address)?.address : undefined;
    if (address === undefined) throw invalid(`prevResult.ips[${i}].address`, 'not an address in CIDR form');
    return address;
  });
}

function attachments(value: unknown): Attachment[] {
  const path = 'cni.dev/valid-attachments';
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalid(path, 'must be a list of {containerID, ifname}');
  return value.map((item, i) => {
    if (!isPlainObject(item) || typeof item.containerID !== 'string' || typeof item.ifname !== 'string') {
      throw invalid(`${path}[${i}]`, 'must be an object with string containerID and ifname');
    }
    return { containerID: item.containerID, ifname: item.ifname };
  });
}
