/**
 * Facts of the CNI specification that Warren speaks: versions, commands, result shapes and the
 * conversion of a result to the version the runtime's config asked for.
 */

import { defined } from '../core/defined.ts';
import type { Dns, Route } from './routes-and-dns.ts';

export const SPEC_VERSION = '1.1.0';

/** Config versions Warren answers, each in its own result format. */
export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;
export type CniVersion = (typeof SUPPORTED_VERSIONS)[number];

export function isSupportedVersion(version: string): version is CniVersion {
  return (SUPPORTED_VERSIONS as readonly string[]).includes(version);
}

export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS' | 'VERSION';
export const COMMANDS: readonly CniCommand[] = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION'];

/** Versions from which a command exists; a config of an older version cannot ask for it. */
export const COMMAND_SINCE: Record<CniCommand, CniVersion> = {
  ADD: '0.3.0',
  DEL: '0.3.0',
  VERSION: '0.3.0',
  CHECK: '0.4.0',
  GC: '1.1.0',
  STATUS: '1.1.0',
};

export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

export interface IpConfig {
  /** CIDR form: the address with the range's prefix length. */
  readonly address: string;
  readonly gateway?: string;
}

/** Routes and DNS pass through from the IPAM config to the result unchanged. */
export type CniRoute = Route;
export type CniDns = Dns;

/** An IPAM result in the current spec's shape (no interfaces: IPAM plugins report none). */
export interface IpamResult {
  readonly ips: readonly IpConfig[];
  readonly routes: readonly CniRoute[];
  readonly dns: CniDns;
}

/** Renders a result in the format of `version`: 0.3.x and 0.4.0 carry ips[].version. */
export function renderResult(result: IpamResult, version: CniVersion): Record<string, unknown> {
  const legacy = compareVersions(version, '1.0.0') < 0;
  const ips = result.ips.map((ip) => ({
    ...(legacy ? { version: ip.address.includes(':') ? '6' : '4' } : {}),
    address: ip.address,
    ...defined({ gateway: ip.gateway }),
  }));
  return { cniVersion: version, ips, routes: result.routes, dns: result.dns };
}

export function versionResult(): Record<string, unknown> {
  return { cniVersion: SPEC_VERSION, supportedVersions: [...SUPPORTED_VERSIONS] };
}
