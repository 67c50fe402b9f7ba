/**
 * IP address math on bigint, for IPv4 and IPv6 alike. Parsing is strict: anything that is not an
 * unambiguous address (leading zeros in an IPv4 octet, zone IDs, stray characters) is refused,
 * because an address the operator did not mean is worse than an error.
 */

export type Family = 4 | 6;

export interface IPAddress {
  readonly family: Family;
  readonly value: bigint;
}

/** A CIDR: the address as written and its prefix length. */
export interface Cidr {
  readonly address: IPAddress;
  readonly length: number;
}

export function bitsOf(family: Family): 32 | 128 {
  return family === 4 ? 32 : 128;
}

const IPV4_OCTET = /^(0|[1-9][0-9]{0,2})$/;
const IPV6_GROUP = /^[0-9a-fA-F]{1,4}$/;

function parseIPv4(text: string): bigint | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (!IPV4_OCTET.test(part)) return undefined;
    const octet = Number(part);
    if (octet > 255) return undefined;
    value = (value << 8n) | BigInt(octet);
  }
  return value;
}

function parseIPv6(text: string): bigint | undefined {
  if (text.length > 45) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groupsOf = (part: string): string[] => (part === '' ? [] : part.split(':'));
  const head = groupsOf(halves[0] ?? '');
  const tail = halves.length === 2 ? groupsOf(halves[1] ?? '') : [];
  const words: number[] = [];
  const pushGroups = (groups: string[], out: number[], allowV4Tail: boolean): boolean => {
    for (let i = 0; i < groups.length; i++) {
      const group = groups[i] ?? '';
      if (allowV4Tail && i === groups.length - 1 && group.includes('.')) {
        const v4 = parseIPv4(group);
        if (v4 === undefined) return false;
        out.push(Number(v4 >> 16n), Number(v4 & 0xffffn));
        continue;
      }
      if (!IPV6_GROUP.test(group)) return false;
      out.push(parseInt(group, 16));
    }
    return true;
  };
  const tailWords: number[] = [];
  const v4InHead = halves.length === 1;
  if (!pushGroups(head, words, v4InHead)) return undefined;
  if (!pushGroups(tail, tailWords, true)) return undefined;
  if (halves.length === 1) {
    if (words.length !== 8) return undefined;
  } else {
    const missing = 8 - words.length - tailWords.length;
    if (missing < 1) return undefined;
    for (let i = 0; i < missing; i++) words.push(0);
  }
  words.push(...tailWords);
  let value = 0n;
  for (const word of words) value = (value << 16n) | BigInt(word);
  return value;
}

/** Parses an IPv4 or IPv6 address; undefined when `text` is not exactly one. */
export function parseIP(text: string): IPAddress | undefined {
  if (typeof text !== 'string') return undefined;
  if (text.includes(':')) {
    const value = parseIPv6(text);
    return value === undefined ? undefined : { family: 6, value };
  }
  const value = parseIPv4(text);
  return value === undefined ? undefined : { family: 4, value };
}

/** Canonical text: dotted quad, or RFC 5952 IPv6 (lower case, longest zero run compressed). */
export function formatIP(ip: IPAddress): string {
  if (ip.family === 4) {
    const v = ip.value;
    return [24n, 16n, 8n, 0n].map((shift) => String((v >> shift) & 0xffn)).join('.');
  }
  const words: number[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) words.push(Number((ip.value >> shift) & 0xffffn));
  let bestStart = -1;
  let bestLength = 0;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (ws: number[]): string => ws.map((w) => w.toString(16)).join(':');
  if (bestLength < 2) return hex(words);
  return `${hex(words.slice(0, bestStart))}::${hex(words.slice(bestStart + bestLength))}`;
}

/** Parses `address/length`; undefined when malformed or the length is out of bounds. */
export function parseCidr(text: string): Cidr | undefined {
  if (typeof text !== 'string') return undefined;
  const slash = text.indexOf('/');
  if (slash < 0 || slash !== text.lastIndexOf('/')) return undefined;
  const address = parseIP(text.slice(0, slash));
  const lengthText = text.slice(slash + 1);
  if (address === undefined || !/^(0|[1-9][0-9]{0,2})$/.test(lengthText)) return undefined;
  const length = Number(lengthText);
  if (length > bitsOf(address.family)) return undefined;
  return { address, length };
}

/** Mask of the host part of a prefix of `length` bits. */
export function hostMask(family: Family, length: number): bigint {
  return (1n << BigInt(bitsOf(family) - length)) - 1n;
}

export function networkOf(cidr: Cidr): bigint {
  return cidr.address.value & ~hostMask(cidr.address.family, cidr.length);
}

export function lastOf(cidr: Cidr): bigint {
  return networkOf(cidr) | hostMask(cidr.address.family, cidr.length);
}

/** True when the CIDR names a network (no host bits set), as `10.0.0.0/24` does and `10.0.0.5/24` does not. */
export function isNetwork(cidr: Cidr): boolean {
  return (cidr.address.value & hostMask(cidr.address.family, cidr.length)) === 0n;
}

export function formatCidr(family: Family, value: bigint, length: number): string {
  return `${formatIP({ family, value })}/${length}`;
}

export function contains(cidr: Cidr, ip: IPAddress): boolean {
  return ip.family === cidr.address.family && ip.value >= networkOf(cidr) && ip.value <= lastOf(cidr);
}
