/**
 * A KubeApiClient of a test's own HTTPS server (not the fake API server, whose kubeconfig file
 * names it: fake-kube-api.ts): a kubeconfig of one cluster at the server's URL that trusts the CA
 * which signed its certificate (tls.ts), with a bearer token, and the client opened on it. The
 * caller closes the client.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { KubeApiClient, type KubeApiClientOptions } from '../../src/store/kubernetes/api-client.ts';

/** A test's HTTPS server: where it listens and the CA (PEM) its certificate is signed by. */
export interface TlsServerAddress {
  readonly url: string;
  readonly caPem: string;
}

/** A client of `server`, with `options` (its deadlines, counter, HTTP/2 choice). */
export function openKubeClientOf(
  server: TlsServerAddress,
  options: Omit<KubeApiClientOptions, 'kubeConfig'> = {},
): Promise<KubeApiClient> {
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'c', server: server.url, caData: Buffer.from(server.caPem).toString('base64') }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return KubeApiClient.open({ kubeConfig: config, ...options });
}
