/**
 * Where the agent's Kubernetes credentials come from: a kubeconfig file when one is named
 * (`--kubeconfig`), else the pod's own service account (in-cluster: the token and CA under
 * /var/run/secrets/kubernetes.io/serviceaccount, the API server from KUBERNETES_SERVICE_HOST and
 * KUBERNETES_SERVICE_PORT), loaded by @kubernetes/client-node.
 *
 * Guarantees: either a KubeConfig with a current cluster, or a WarrenError `INVALID_CONFIG` that
 * names every missing piece, so an operator fixes it in one go. The service account token is read
 * by the library at each request (and again every minute), so a rotated token is picked up.
 */
import { accessSync, constants } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { WarrenError, messageOf } from '../../core/errors.ts';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface LoadKubeConfigOptions {
  /** Prefixed to the service account's paths (tests); default none. */
  readonly root?: string;
  /** Where KUBERNETES_SERVICE_HOST and _PORT are read; default the process' environment. */
  readonly env?: NodeJS.ProcessEnv;
}

function readable(path: string): boolean {
  try {
    accessSync(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

/** The KubeConfig from `path`, or else from the service account; `INVALID_CONFIG` when neither works. */
export function loadKubeConfig(path?: string, options: LoadKubeConfigOptions = {}): KubeConfig {
  return path === undefined || path === '' ? inCluster(options) : fromFile(path);
}

function fromFile(path: string): KubeConfig {
  const config = new KubeConfig();
  try {
    config.loadFromFile(path);
  } catch (error) {
    throw new WarrenError('INVALID_CONFIG', `cannot load the kubeconfig ${path}: ${messageOf(error)}`, {
      cause: error,
    });
  }
  const cluster = config.getCurrentCluster();
  if (cluster === null) {
    const context = config.getCurrentContext();
    throw new WarrenError(
      'INVALID_CONFIG',
      `the kubeconfig ${path} names no usable cluster: ` +
        `${context ? `its current-context ${JSON.stringify(context)} has none` : 'it sets no current-context'}`,
    );
  }
  if (config.getCurrentUser() === null)
    throw new WarrenError(
      'INVALID_CONFIG',
      `the kubeconfig ${path} names no user for its current-context ${JSON.stringify(config.getCurrentContext())}`,
    );
  try {
    new URL(cluster.server);
  } catch {
    throw new WarrenError(
      'INVALID_CONFIG',
      `the kubeconfig ${path} gives the cluster ${JSON.stringify(cluster.name)} no valid server URL ` +
        `(${JSON.stringify(cluster.server)})`,
    );
  }
  return config;
}

function inCluster(options: LoadKubeConfigOptions): KubeConfig {
  const env = options.env ?? process.env;
  const root = options.root ?? '';
  const missing: string[] = [];
  if (!env.KUBERNETES_SERVICE_HOST) missing.push('KUBERNETES_SERVICE_HOST is not set');
  if (!env.KUBERNETES_SERVICE_PORT) missing.push('KUBERNETES_SERVICE_PORT is not set');
  for (const file of ['token', 'ca.crt']) {
    const full = `${root}${SERVICE_ACCOUNT_DIR}/${file}`;
    if (!readable(full)) missing.push(`${full} is missing or unreadable`);
  }
  if (missing.length > 0) {
    throw new WarrenError(
      'INVALID_CONFIG',
      `no Kubernetes credentials: no --kubeconfig was given, and this is not a pod with a service account ` +
        `(${missing.join('; ')})`,
    );
  }
  // loadFromCluster reads the address from process.env: hand it the one checked.
  const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
  process.env.KUBERNETES_SERVICE_HOST = env.KUBERNETES_SERVICE_HOST;
  process.env.KUBERNETES_SERVICE_PORT = env.KUBERNETES_SERVICE_PORT;
  try {
    const config = new KubeConfig();
    config.loadFromCluster(root);
    return config;
  } finally {
    restore('KUBERNETES_SERVICE_HOST', saved.host);
    restore('KUBERNETES_SERVICE_PORT', saved.port);
  }
}

function restore(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}
