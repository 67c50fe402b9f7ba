/**
 * A kubeconfig selection (kubeconfig-file.ts, or the pod's service account) as the API clients use
 * it (store/kubernetes/kube-access.ts): the server, the TLS settings of a connection, and the
 * credentials of each request.
 *
 * Guarantees:
 * - every file the kubeconfig names (token, CA, client certificate and key) is read when first
 *   needed and again once its copy is older than REREAD_MS (client-go's period for a service
 *   account's token), so a rotated token is sent within a minute, without a read per request (the
 *   store's client applies the credentials to each one); a file mounted late is found by the next
 *   use, since a failed read is not kept; a file that cannot be read is a rejection naming it and
 *   the key that named it (the request is not sent without);
 * - `insecure-skip-tls-verify` turns the server's certificate check off, and nothing else does.
 */
import { readFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { messageOf } from '../../core/errors.ts';
import type { KubeAccess, KubeCluster } from '../../store/kubernetes/kube-access.ts';
import type { KubeconfigSelection, Material } from './kubeconfig-file.ts';

/** How long a file's content (a token, a certificate) is used before the file is read again. */
export const REREAD_MS = 60_000;

export interface KubeCredentialsOptions {
  /** Milliseconds now, for the files' re-reading (tests); default Date.now. */
  readonly now?: () => number;
}

export class KubeCredentials implements KubeAccess {
  readonly #selection: KubeconfigSelection;
  readonly #now: () => number;
  /** Each file's content and when it was read, by path; a file is absent until first read. */
  readonly #files = new Map<string, { readonly bytes: Buffer; readonly readAt: number }>();

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
    if (cluster.ca !== undefined) options.ca = this.#material(cluster.ca, at('certificate-authority'));
    if (cluster.insecureSkipTlsVerify) options.rejectUnauthorized = false;
    if (cluster.tlsServerName !== undefined) options.servername = cluster.tlsServerName;
    if (user.clientCertificate !== undefined)
      options.cert = this.#material(user.clientCertificate, 'the client-certificate');
    if (user.clientKey !== undefined) options.key = this.#material(user.clientKey, 'the client-key');
    const headers: Record<string, string> = {};
    const token =
      user.tokenFile !== undefined ? this.#read(user.tokenFile, 'the token').toString('utf8').trim() : user.token;
    if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    else if (user.basic !== undefined) {
      const pair = `${user.basic.username}:${user.basic.password}`;
      headers.Authorization = `Basic ${Buffer.from(pair).toString('base64')}`;
    }
    options.headers = { ...(options.headers as Record<string, string> | undefined), ...headers };
  }

  #material(from: Material, what: string): Buffer {
    return 'data' in from ? from.data : this.#read(from.file, what);
  }

  /** The file's content, as read at most REREAD_MS ago. */
  #read(file: string, what: string): Buffer {
    const now = this.#now();
    const kept = this.#files.get(file);
    if (kept !== undefined && now - kept.readAt < REREAD_MS) return kept.bytes;
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch (error) {
      throw new Error(`cannot read ${what} file ${file}: ${messageOf(error)}`, { cause: error });
    }
    this.#files.set(file, { bytes, readAt: now });
    return bytes;
  }
}
