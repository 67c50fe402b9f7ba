/**
 * How a setting's text becomes its value: one reader per kind (seconds, whole numbers, on/off, one
 * of a few words, paths, comma-separated lists), and the readers of the settings checked by rules
 * of their own (the socket path's length, etcd endpoints, containerd namespace names). A reader is
 * given the text a flag, the environment or the default gave (defaults are written as a flag would
 * give them, so they pass the same checks) and refuses bad text with an INVALID_CONFIG naming the
 * flag (and, for the kinds, the variable). Readers are pure but for `resolve` against the working
 * directory they are told.
 */
import { resolve } from 'node:path';
import { WarrenError } from '../../core/errors.ts';
import { type CniVersion, SUPPORTED_VERSIONS, isSupportedVersion } from '../../cni/spec.ts';
import { isEtcdEndpoint } from '../../store/store.ts';
import { type ListenAddress, metricsAddressOf } from './listen-address.ts';

/** What a reader knows besides the text: the setting it reads (for its errors), the working directory. */
export interface ReadContext {
  readonly flag: string;
  readonly env: string;
  readonly cwd: string;
}

/** Reads one setting's text into its value; a value of undefined leaves the option out. */
export type Reader<T> = (text: string, at: ReadContext) => T;

/** The refusal of a setting's text, naming its flag and variable. */
export function refusal(at: ReadContext, text: string, why: string): WarrenError {
  return new WarrenError('INVALID_CONFIG', `--${at.flag} / ${at.env}: "${text}" ${why}`);
}

/** A number of seconds from `min` to a day. */
export function seconds(min: number): Reader<number> {
  return (text, at) => {
    const n = Number(text);
    if (!Number.isFinite(n) || n < min || n > 86_400) {
      throw refusal(at, text, `is not a number of seconds from ${min} to 86400`);
    }
    return n;
  };
}

/** A whole number from 0 to `max`. */
export function wholeNumber(max: number): Reader<number> {
  return (text, at) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 0 || n > max) throw refusal(at, text, `is not a whole number from 0 to ${max}`);
    return n;
  };
}

/** `on` or `off`. */
export const onOff: Reader<boolean> = (text, at) => {
  if (text !== 'on' && text !== 'off') throw refusal(at, text, 'is not on or off');
  return text === 'on';
};

/** One of `words`, after `normal` (upper-casing, say) has been applied to the text. */
export function oneOf<const W extends string>(
  words: readonly W[],
  normal: (text: string) => string = (text) => text,
): Reader<W> {
  const said = `${words.slice(0, -1).join(', ')} or ${words.at(-1)}`;
  return (text, at) => {
    const word = normal(text);
    if (!(words as readonly string[]).includes(word)) throw refusal(at, word, `is not ${said}`);
    return word as W;
  };
}

/** Text as given. */
export const verbatim: Reader<string> = (text) => text;

/** A path, made absolute against the working directory. */
export const path: Reader<string> = (text, at) => resolve(at.cwd, text);

/** Comma-separated items, blanks around them and empty items dropped. */
export function items(text: string): string[] {
  return text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

/** The longest path a unix socket address holds (sun_path, less its NUL). */
const MAX_SOCKET_PATH = 107;

/** A socket path, absolute, that fits a unix socket address. */
export const socketPath: Reader<string> = (text, at) => {
  const socket = path(text, at);
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
    throw new WarrenError(
      'INVALID_CONFIG',
      `socket path ${socket} is longer than ${MAX_SOCKET_PATH} bytes, the limit of a unix socket address; ` +
        'pass a shorter --socket',
    );
  }
  return socket;
};

/** Comma-separated directories, absolute, each once. */
export const directories: Reader<string[]> = (text, at) => [...new Set(items(text).map((dir) => path(dir, at)))];

/** A directory; empty (or blanks) turns what it is for off. */
export const directoryOrOff: Reader<string | undefined> = (text, at) =>
  text.trim() === '' ? undefined : path(text, at);

/** A listen address, host:port; empty (or blanks) turns what it is for off. */
export const listenAddressOrOff: Reader<ListenAddress | undefined> = (text) => metricsAddressOf(text).metricsAddress;

/** Comma-separated etcd client URLs. */
export const etcdEndpoints: Reader<string[]> = (text) => {
  const urls = items(text);
  for (const url of urls) {
    if (!isEtcdEndpoint(url)) {
      const why = 'is not http://host:port or https://host:port';
      throw new WarrenError('INVALID_CONFIG', `--etcd-endpoints: "${url}" ${why}`);
    }
  }
  return urls;
};

/** A key prefix in etcd: starts and ends with a slash. */
export const etcdPrefix: Reader<string> = (text) => {
  if (!text.startsWith('/') || !text.endsWith('/')) {
    throw new WarrenError('INVALID_CONFIG', `--etcd-prefix: "${text}" must start and end with /`);
  }
  return text;
};

/** Comma-separated containerd namespaces, at least one. */
export const containerdNamespaces: Reader<string[]> = (text) => {
  const namespaces = items(text);
  for (const ns of namespaces) {
    // containerd's own rule for namespace names: labels of letters, digits, '-' and '_', joined by dots.
    if (!/^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$/.test(ns) || ns.length > 76) {
      throw new WarrenError('INVALID_CONFIG', `--containerd-namespaces: "${ns}" is not a containerd namespace name`);
    }
  }
  if (namespaces.length === 0) {
    const why = 'give at least one namespace (or --containerd off)';
    throw new WarrenError('INVALID_CONFIG', `--containerd-namespaces: ${why}`);
  }
  return namespaces;
};

/** A Kubernetes namespace name: an RFC 1123 label (lower-case letters, digits and '-', at most 63). */
export const kubeNamespace: Reader<string> = (text, at) => {
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(text)) {
    throw refusal(at, text, "is not a Kubernetes namespace name (lower-case letters, digits and '-', at most 63)");
  }
  return text;
};

/** A CNI version Warren speaks. */
export const cniVersion: Reader<CniVersion> = (text, at) => {
  if (!isSupportedVersion(text)) {
    throw refusal(at, text, `is not a CNI version Warren speaks (${SUPPORTED_VERSIONS.join(', ')})`);
  }
  return text;
};
