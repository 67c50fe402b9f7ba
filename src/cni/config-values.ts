/**
 * Reading the values of a network config's IPAM section: core's validation kit refusing with
 * INVALID_CONFIG, plus the readers of addresses and CIDRs. Every refusal's message starts with the
 * value's path; unknown keys are refused all at once, each named, with a hint when one looks like
 * a known key mistyped.
 */
import { WarrenError } from '../core/errors.ts';
import { quoted, validator } from '../core/validate.ts';
import { type Cidr, type IPAddress, bitsOf, networkOf, parseCidr, parseIP } from '../ipam/address.ts';

export { describe, isPlainObject, quoted } from '../core/validate.ts';

export const { invalid, refuseUnknownKeys, stringAt, optionalString, optionalBoolean, stringListAt } = validator(
  (message) => new WarrenError('INVALID_CONFIG', message),
);

export function ipAt(value: unknown, path: string): IPAddress {
  const text = stringAt(value, path);
  const ip = parseIP(text);
  if (ip === undefined) throw invalid(path, `${quoted(text)} is not an IP address`);
  return ip;
}

/**
 * A CIDR as whereabouts reads one: the network it names, host bits masked off (Go's
 * net.ParseCIDR), so `192.168.2.229/30` is 192.168.2.228/30. A bare address is a /32 or /128
 * where `allowBareAddress` says so (exclude lists).
 */
export function subnetAt(value: unknown, path: string, allowBareAddress: boolean): Cidr {
  const text = stringAt(value, path);
  let cidr = parseCidr(text);
  if (cidr === undefined && allowBareAddress && !text.includes('/')) {
    const ip = parseIP(text);
    if (ip !== undefined) cidr = { address: ip, length: bitsOf(ip.family) };
  }
  if (cidr === undefined) throw invalid(path, `${quoted(text)} is not a CIDR`);
  return { address: { family: cidr.address.family, value: networkOf(cidr) }, length: cidr.length };
}

/** The longest rest `cooldown_seconds` may ask for: a day. */
export const MAX_COOLDOWN_SECONDS = 86_400;

/** Whether `value` is a `cooldown_seconds` the config accepts: whole seconds, 0 to a day. */
export function isCooldownSeconds(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_COOLDOWN_SECONDS;
}
