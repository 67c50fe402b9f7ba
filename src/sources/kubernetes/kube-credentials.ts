/**
 * A kubeconfig selection (kubeconfig-file.ts, or the pod's service account) as the API clients use
 * it (store/kubernetes/kube-access.ts): the server, the TLS settings of a connection, and the
 * credentials of each request.
 *
 * Guarantees:
 * - files the kubeconfig names (CA, client certificate and key) are read when a client opens, so a
 *   file mounted late is found by the next opening; a file that cannot be read is a rejection
 *   naming the file and the key that named it;
 * - a token file is read again once its copy is older than TOKEN_REREAD_MS (client-go's period for
 *   a service account's token), so a rotated token is sent within a minute, without a read per
 *   request; an unreadable token file is a rejection naming it (the request is not sent without);
 * - `insecure-skip-tls-verify` turns the server's certificate check off, and nothing else does.
 */
import { readFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { messageOf } from '../../core/errors.ts';
import type { KubeAccess, KubeCluster } from '../../store/kubernetes/kube-access.ts';
import type { KubeconfigSelection, Material } from './kubeconfig-file.ts';

/** How long a token read from a file is used before the file is read again. */
export const TOKEN_REREAD_MS = 60_000;

export interface KubeCredentialsOptions {
  /** Milliseconds now, for the token file's re-reading (tests); default Date.now. */
  readonly now?: () => number;
}

export class KubeCredentials implements KubeAccess {
  readonly #selection: KubeconfigSelection;
  readonly #now: () => number;
  /** The token file's content and when it was read; undefined until first needed. */
  #token: { readonly value: string; readonly readAt: number } | undefined;

  constructor(selection: KubeconfigSelection, options: KubeCredentialsOptions = {}) {
    this.#selection = selection;
    this.#now = options.now ?? Date.now;
  }

  /** The context the selection came from (`in-cluster` for a service account). */
  get context(): string {
    return this.#selection.context;
  }

  getCurrentCluster(): KubeCluster {
    return { name: this.#selection.cluster.name, server: this.#selection.cluster.server };
  }

  async applyToHTTPSOptions(options: RequestOptions): Promise<void> {
    const { cluster, user } = this.#selection;
    const at = (key: string): string => `the ${key} of the kubeconfig's ${JSON.stringify(cluster.name)}`;
    if (cluster.ca !== undefined) options.ca = material(cluster.ca, at('certificate-authority'));
    if (cluster.insecureSkipTlsVerify) options.rejectUnauthorized = false;
    if (cluster.tlsServerName !== undefined) options.servername = cluster.tlsServerName;
    if (user.clientCertificate !== undefined) options.cert = material(user.clientCertificate, 'the client-certificate');
    if (user.clientKey !== undefined) options.key = material(user.clientKey, 'the client-key');
    const headers: Record<string, string> = {};
    const token = user.tokenFile !== undefined ? this.#tokenOf(user.tokenFile) : user.token;
    if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    else if (user.basic !== undefined) {
      const pair = `${user.basic.username}:${user.basic.password}`;
      headers.Authorization = `Basic ${Buffer.from(pair).toString('base64')}`;
    }
    options.headers = { ...(options.headers as Record<string, string> | undefined), ...headers };
  }

  #tokenOf(file: string): string {
    const now = this.#now();
    const kept = this.#token;
    if (kept !== undefined && now - kept.readAt < TOKEN_REREAD_MS) return kept.value;
    let value: string;
    try {
      value = readFileSync(file, 'utf8').trim();
    } catch (error) {
      throw new Error(`cannot read the token file ${file}: ${messageOf(error)}`, { cause: error });
    }
    this.#token = { value, readAt: now };
    return value;
  }
}

function material(from: Material, what: string): Buffer {
  if ('data' in from) return from.data;
  try {
    return readFileSync(from.file);
  } catch (error) {
    throw new Error(`cannot read ${what} file ${from.file}: ${messageOf(error)}`, { cause: error });
  }
}
