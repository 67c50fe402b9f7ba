/**
 * A kubeconfig file's text, read as kubectl reads it, down to what the agent connects with: the
 * current context's cluster (server, CA, TLS checks) and user (token, token file, client
 * certificate, basic auth). Pure: no file is read here (paths are resolved against the
 * kubeconfig's own directory, as kubectl does, and read when used: kube-credentials.ts).
 *
 * Guarantees:
 * - the answer is a `KubeconfigSelection`, or a WarrenError INVALID_CONFIG that names the file and
 *   the key that is wrong (`contexts[0].context.cluster`, `users["admin"].user.exec`), for any
 *   text at all: malformed YAML, a list where a mapping belongs, a name nothing defines;
 * - exec and auth-provider credential plugins are refused by their key, saying what to use
 *   instead: running another program for a token is not something a node agent does behind its
 *   operator's back, and the plugins the library ran (OIDC, cloud CLIs) are not in its image;
 * - `proxy-url` is refused by its key: the agent's client connects to the API server directly;
 * - only the current context's cluster and user are checked: a kubeconfig with other, broken
 *   entries (a developer's, with many clusters) still loads, as it does for kubectl.
 */
import { resolve } from 'node:path';
import { CORE_SCHEMA, load } from 'js-yaml';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { describe, isPlainObject } from '../../core/validate.ts';

/** A file named by the kubeconfig, or its content given inline (`-data`, base64 decoded). */
export type Material = { readonly file: string } | { readonly data: Buffer };

export interface KubeconfigCluster {
  readonly name: string;
  /** The server's URL as written (http or https). */
  readonly server: string;
  readonly ca?: Material;
  readonly insecureSkipTlsVerify: boolean;
  readonly tlsServerName?: string;
}

export interface KubeconfigUser {
  readonly name: string;
  readonly token?: string;
  /** Read again as it may be rotated. */
  readonly tokenFile?: string;
  readonly clientCertificate?: Material;
  readonly clientKey?: Material;
  readonly basic?: { readonly username: string; readonly password: string };
}

export interface KubeconfigSelection {
  readonly context: string;
  readonly cluster: KubeconfigCluster;
  readonly user: KubeconfigUser;
}

/** The user keys that run a plugin, each refused by name. */
const PLUGIN_KEYS = ['exec', 'auth-provider'] as const;

/** Reading one kubeconfig: its path for messages, its directory for relative paths. */
class Reader {
  readonly #path: string;
  readonly #dir: string;

  constructor(path: string, dir: string) {
    this.#path = path;
    this.#dir = dir;
  }

  fail(problem: string): never {
    throw new WarrenError('INVALID_CONFIG', `the kubeconfig ${this.#path} ${problem}`);
  }

  /** A mapping at `key`, or a refusal naming it. */
  mapping(value: unknown, key: string): Record<string, unknown> {
    if (!isPlainObject(value)) this.fail(`has ${describe(value)} at ${key}, not a mapping`);
    return value;
  }

  /** An optional string at `key`; absent and empty are the same. */
  text(holder: Record<string, unknown>, field: string, key: string): string | undefined {
    const value = holder[field];
    if (value === undefined || value === null || value === '') return undefined;
    if (typeof value !== 'string') this.fail(`has ${describe(value)} at ${key}.${field}, not a string`);
    return value;
  }

  flag(holder: Record<string, unknown>, field: string, key: string): boolean {
    const value = holder[field];
    if (value === undefined || value === null) return false;
    if (typeof value !== 'boolean') this.fail(`has ${describe(value)} at ${key}.${field}, not true or false`);
    return value;
  }

  /** `field` (a path, relative to the kubeconfig's directory) or `field-data` (base64), not both. */
  material(holder: Record<string, unknown>, field: string, key: string): Material | undefined {
    const file = this.text(holder, field, key);
    const data = this.text(holder, `${field}-data`, key);
    if (file !== undefined && data !== undefined) this.fail(`sets both ${key}.${field} and ${key}.${field}-data`);
    if (file !== undefined) return { file: resolve(this.#dir, file) };
    if (data === undefined) return undefined;
    const compact = data.replace(/\s+/g, '');
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(compact) || compact.length % 4 !== 0)
      this.fail(`has ${key}.${field}-data that is not base64`);
    return { data: Buffer.from(compact, 'base64') };
  }

  path(holder: Record<string, unknown>, field: string, key: string): string | undefined {
    const file = this.text(holder, field, key);
    return file === undefined ? undefined : resolve(this.#dir, file);
  }

  /** The entry of `list` (clusters, users, contexts) named `name`, with the key it is found at. */
  named(document: Record<string, unknown>, list: string, name: string, by: string): [Record<string, unknown>, string] {
    const entries = document[list] ?? [];
    if (!Array.isArray(entries)) this.fail(`has ${describe(entries)} at ${list}, not a list`);
    for (const [index, entry] of entries.entries()) {
      const item = this.mapping(entry, `${list}[${index}]`);
      if (item.name === name) return [item, `${list}[${JSON.stringify(name)}]`];
    }
    return this.fail(`has no ${list.slice(0, -1)} named ${JSON.stringify(name)} (named by ${by})`);
  }
}

/**
 * The selection of the kubeconfig `text`, read from `path` (its directory resolves relative
 * paths); INVALID_CONFIG naming what is wrong.
 */
export function parseKubeconfig(text: string, path: string, dir: string): KubeconfigSelection {
  let document: unknown;
  try {
    document = load(text, { schema: CORE_SCHEMA, filename: path });
  } catch (error) {
    throw new WarrenError('INVALID_CONFIG', `cannot load the kubeconfig ${path}: ${messageOf(error)}`, {
      cause: error,
    });
  }
  const read: Reader = new Reader(path, dir);
  const root = read.mapping(document ?? {}, 'its top level');
  const current = read.text(root, 'current-context', 'the top level');
  if (current === undefined) read.fail('names no usable cluster: it sets no current-context');
  const [contextEntry, contextKey] = read.named(root, 'contexts', current, 'current-context');
  const context = read.mapping(contextEntry.context, `${contextKey}.context`);
  const clusterName = read.text(context, 'cluster', `${contextKey}.context`);
  if (clusterName === undefined)
    read.fail(`names no usable cluster: its current-context ${JSON.stringify(current)} has none`);
  const userName = read.text(context, 'user', `${contextKey}.context`);
  if (userName === undefined) read.fail(`names no user for its current-context ${JSON.stringify(current)}`);
  return {
    context: current,
    cluster: clusterOf(read, ...read.named(root, 'clusters', clusterName, `${contextKey}.context.cluster`)),
    user: userOf(read, ...read.named(root, 'users', userName, `${contextKey}.context.user`)),
  };
}

function clusterOf(read: Reader, entry: Record<string, unknown>, key: string): KubeconfigCluster {
  const name = entry.name as string;
  const cluster = read.mapping(entry.cluster, `${key}.cluster`);
  const at = `${key}.cluster`;
  if (read.text(cluster, 'proxy-url', at) !== undefined)
    read.fail(`sets ${at}.proxy-url: Warren's agent connects to the API server directly, through no proxy`);
  const server = read.text(cluster, 'server', at);
  if (server === undefined) read.fail(`gives the cluster ${JSON.stringify(name)} no server (${at}.server)`);
  let url: URL | undefined;
  try {
    url = new URL(server);
  } catch {}
  if (url === undefined || (url.protocol !== 'https:' && url.protocol !== 'http:'))
    read.fail(
      `gives the cluster ${JSON.stringify(name)} no valid server URL (${JSON.stringify(server)} at ${at}.server)`,
    );
  const ca = read.material(cluster, 'certificate-authority', at);
  const tlsServerName = read.text(cluster, 'tls-server-name', at);
  return {
    name,
    server,
    insecureSkipTlsVerify: read.flag(cluster, 'insecure-skip-tls-verify', at),
    ...(ca === undefined ? {} : { ca }),
    ...(tlsServerName === undefined ? {} : { tlsServerName }),
  };
}

function userOf(read: Reader, entry: Record<string, unknown>, key: string): KubeconfigUser {
  const name = entry.name as string;
  const at = `${key}.user`;
  const user = read.mapping(entry.user ?? {}, at);
  for (const plugin of PLUGIN_KEYS) {
    if (user[plugin] !== undefined && user[plugin] !== null)
      read.fail(
        `sets ${at}.${plugin}: Warren's agent runs no credential plugins; give the user a token, a tokenFile ` +
          `(a service account's) or a client-certificate and client-key`,
      );
  }
  const token = read.text(user, 'token', at);
  const tokenFile = read.path(user, 'tokenFile', at);
  const clientCertificate = read.material(user, 'client-certificate', at);
  const clientKey = read.material(user, 'client-key', at);
  if ((clientCertificate === undefined) !== (clientKey === undefined))
    read.fail(`sets only one of ${at}.client-certificate and ${at}.client-key: both are needed`);
  const username = read.text(user, 'username', at);
  const password = read.text(user, 'password', at);
  return {
    name,
    ...(token === undefined ? {} : { token }),
    ...(tokenFile === undefined ? {} : { tokenFile }),
    ...(clientCertificate === undefined ? {} : { clientCertificate }),
    ...(clientKey === undefined ? {} : { clientKey }),
    ...(username === undefined ? {} : { basic: { username, password: password ?? '' } }),
  };
}
