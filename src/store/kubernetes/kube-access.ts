/**
 * What a Kubernetes API client needs to know of a kubeconfig, and no more: the current cluster's
 * server, and the TLS settings and credentials one request carries. Warren's own loader
 * (sources/kubernetes/kubeconfig.ts) makes one, which is what the agent runs on; a KubeConfig of
 * @kubernetes/client-node is one as well, by shape (the command line's tests and tools hand those
 * in), so neither the store nor the sources load that library for it.
 *
 * Guarantees asked of an implementation:
 * - `getCurrentCluster` is null when the kubeconfig names no usable cluster, else its name and its
 *   server's URL as written;
 * - `applyToHTTPSOptions` sets what a request needs: `ca`, `cert`, `key`, `rejectUnauthorized`,
 *   `servername` for the connection, and the credentials in `headers` (`Authorization`), read
 *   afresh as often as they may change (a rotated service-account token is picked up); it rejects
 *   when a credential cannot be read now, saying which.
 */
import type { RequestOptions } from 'node:https';

export interface KubeCluster {
  readonly name: string;
  readonly server: string;
  /** A proxy the API server is reached through (only @kubernetes/client-node's KubeConfig gives one). */
  readonly proxyUrl?: string | undefined;
}

export interface KubeAccess {
  getCurrentCluster(): KubeCluster | null;
  applyToHTTPSOptions(options: RequestOptions): Promise<void>;
}
