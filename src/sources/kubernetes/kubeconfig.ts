/**
 * Where the agent's Kubernetes credentials come from: a kubeconfig file when one is named
 * (`--kubeconfig`), else the pod's own service account (in-cluster: the token and CA under
 * /var/run/secrets/kubernetes.io/serviceaccount, the API server from KUBERNETES_SERVICE_HOST and
 * KUBERNETES_SERVICE_PORT).
 *
 * Written here rather than taken from @kubernetes/client-node's KubeConfig for the agent's memory,
 * which every node of a cluster pays: loading that library (its generated models, its undici, its
 * plugins) is what kept the agent on the kubernetes store above the DaemonSet's 100 MiB: ~19 MiB
 * per node idle and ~17 MiB at a herd's peak, even with only the parts it used bundled (`node
 * bench/footprint.ts --rounds 3 --idle-seconds 15 --store kubernetes`, two runs each, one machine,
 * one session: idle 117 and 114 MiB resident with it, 96 and 95 without; 60 and 58 MiB anonymous
 * against 41 and 40; herd peak 132 and 135 against 115 and 116). What the agent uses of a
 * kubeconfig is small (kubeconfig-file.ts says what is read, and what is refused: exec and
 * auth-provider plugins, proxy-url).
 *
 * Guarantees: either credentials with a current cluster (kube-credentials.ts), or a WarrenError
 * `INVALID_CONFIG` that names every missing piece, or the key that is wrong, so an operator fixes
 * it in one go. The service account's token is read again at least every minute (a rotated token
 * is picked up); the process environment is only read.
 */
import { accessSync, constants, readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { dirname } from 'node:path';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { KubeCredentials, type KubeCredentialsOptions } from './kube-credentials.ts';
import { parseKubeconfig } from './kubeconfig-file.ts';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface LoadKubeConfigOptions extends KubeCredentialsOptions {
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

/** The credentials from `path`, or else from the service account; `INVALID_CONFIG` when neither works. */
export function loadKubeConfig(path?: string, options: LoadKubeConfigOptions = {}): KubeCredentials {
  return path === undefined || path === '' ? inCluster(options) : fromFile(path, options);
}

function fromFile(path: string, options: LoadKubeConfigOptions): KubeCredentials {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new WarrenError('INVALID_CONFIG', `cannot load the kubeconfig ${path}: ${messageOf(error)}`, {
      cause: error,
    });
  }
  return new KubeCredentials(parseKubeconfig(text, path, dirname(path)), options);
}

function inCluster(options: LoadKubeConfigOptions): KubeCredentials {
  const env = options.env ?? process.env;
  const root = options.root ?? '';
  const missing: string[] = [];
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host) missing.push('KUBERNETES_SERVICE_HOST is not set');
  if (!port) missing.push('KUBERNETES_SERVICE_PORT is not set');
  const [token, ca] = ['token', 'ca.crt'].map((file) => `${root}${SERVICE_ACCOUNT_DIR}/${file}`) as [string, string];
  for (const full of [token, ca]) if (!readable(full)) missing.push(`${full} is missing or unreadable`);
  if (missing.length > 0 || !host || !port) {
    throw new WarrenError(
      'INVALID_CONFIG',
      `no Kubernetes credentials: no --kubeconfig was given, and this is not a pod with a service account ` +
        `(${missing.join('; ')})`,
    );
  }
  // As client-go's InClusterConfig, and the library before it: plain HTTP on the usual insecure ports.
  const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
  const server = `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  return new KubeCredentials(
    {
      context: 'in-cluster',
      cluster: { name: 'in-cluster', server, ca: { file: ca }, insecureSkipTlsVerify: false },
      user: { name: 'service-account', tokenFile: token },
    },
    options,
  );
}
