/**
 * A TCP address to listen on (the metrics and dashboard endpoint), read from a setting and
 * written back as text: `host:port`, IPv6 in brackets.
 */
import { WarrenError } from '../../core/errors.ts';

/** A TCP address to listen on; port 0 asks the kernel for a free one. */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** `host:port` or `[v6]:port`; empty (or blanks): off. */
export function metricsAddressOf(text: string): { metricsAddress?: ListenAddress } {
  if (text.trim() === '') return {};
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(text.trim());
  const port = match === null ? NaN : Number(match[3]);
  if (match === null || port > 65_535) {
    throw new WarrenError(
      'INVALID_CONFIG',
      `--metrics-address / WARREN_METRICS_ADDRESS: "${text}" is not host:port (or [IPv6]:port) with a port ` +
        `from 0 to 65535; empty turns metrics off`,
    );
  }
  return { metricsAddress: { host: (match[1] ?? match[2]) as string, port } };
}

/** A listen address as text, IPv6 in brackets. */
export function formatListenAddress(address: ListenAddress): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}
