/**
 * Where the cluster tier's client (api-client.ts) finds the Kubernetes API server and how it is let
 * in, from a kubeconfig (kube-access.ts): the server's URL, the keep-alive connections it
 * is reached over, and the credentials each request carries. The client itself is the exchange:
 * what is sent and what an answer means.
 *
 * Guarantees:
 * - a KubeConfig that names no usable cluster, server or TLS settings is INVALID_CONFIG saying so,
 *   before any connection is made;
 * - HTTP/2 is tried only where it can be spoken: an https server reached directly (no proxy), and
 *   `http2` not turned off (http2-session.ts); the pools below serve everything else;
 * - two pools of connections: REQUEST_SOCKETS for requests, and one without a cap for watches, each
 *   of which holds its connection for minutes (an agent keeps about ten open), so that no watch
 *   waits for a request's connection, nor a request for a watch's (a watch once took the eighth and
 *   last connection, and the Lease renewal behind it waited for ever); behind a proxy, the
 *   library's agent, which speaks it, serves both;
 * - a third, `fresh`, keeps nothing: each request on it opens a new connection, closed after its
 *   answer. A request sent again because its kept connection was stale goes there, so it cannot
 *   draw another stale one from the pool (the server closes its idle connections alike, so when one
 *   was stale the others kept as long may be too). Behind a proxy it is the library's agent, which
 *   keeps no connection either;
 * - credentials are read from the KubeConfig for each request, so a rotated service-account token
 *   is picked up; a KubeConfig that cannot give them then is TRY_AGAIN naming what was being done.
 */
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent, type RequestOptions } from 'node:https';
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { TlsSettings } from './http2-session.ts';
import type { KubeAccess } from './kube-access.ts';

/** Connections requests share. */
const REQUEST_SOCKETS = 8;

export interface ConnectionPools {
  readonly requests: HttpAgent;
  readonly watches: HttpAgent;
  /** No connection kept: a new one for each request (a request sent again after a stale one). */
  readonly fresh: HttpAgent;
}

/** Where the API server is and how it is reached. */
export interface Connection {
  readonly server: URL;
  readonly pools: ConnectionPools;
  /** The TLS settings of an HTTP/2 session to it; undefined: HTTP/1.1 only (plain http, a proxy, off). */
  readonly http2: TlsSettings | undefined;
}

/** The API server of the KubeConfig's current cluster, and how it is reached (`http2`: whether to try h2). */
export async function connectionOf(config: KubeAccess, http2: boolean): Promise<Connection> {
  const cluster = config.getCurrentCluster();
  if (cluster === null) throw new WarrenError('INVALID_CONFIG', 'the kubeconfig names no current cluster');
  let server: URL;
  try {
    server = new URL(cluster.server);
  } catch {
    throw new WarrenError(
      'INVALID_CONFIG',
      `the kubeconfig's cluster server ${JSON.stringify(cluster.server)} is no URL`,
    );
  }
  const tls: RequestOptions = {};
  try {
    await config.applyToHTTPSOptions(tls);
  } catch (error) {
    throw new WarrenError('INVALID_CONFIG', `the kubeconfig cannot be used: ${messageOf(error)}`, { cause: error });
  }
  const proxy = cluster.proxyUrl !== undefined && tls.agent instanceof HttpAgent ? tls.agent : undefined;
  const settings: TlsSettings = defined({
    ca: tls.ca,
    cert: tls.cert,
    key: tls.key,
    rejectUnauthorized: tls.rejectUnauthorized,
    servername: tls.servername,
  });
  const pool = (keepAlive: boolean, maxSockets: number): HttpAgent =>
    proxy !== undefined
      ? proxy
      : server.protocol === 'http:'
        ? new HttpAgent({ keepAlive, maxSockets })
        : new HttpsAgent({ keepAlive, maxSockets, ...settings });
  return {
    server,
    pools: {
      requests: pool(true, REQUEST_SOCKETS),
      watches: pool(true, Number.POSITIVE_INFINITY),
      fresh: pool(false, Number.POSITIVE_INFINITY),
    },
    http2: http2 && proxy === undefined && server.protocol === 'https:' ? settings : undefined,
  };
}

/** The headers of one request: the credentials as the KubeConfig gives them now, and who asks. */
export async function credentialHeaders(
  config: KubeAccess,
  what: string,
  userAgent: string,
): Promise<Record<string, string>> {
  const auth: RequestOptions = {};
  try {
    await config.applyToHTTPSOptions(auth);
  } catch (error) {
    throw new WarrenError('TRY_AGAIN', `no Kubernetes credentials to ${what}: ${messageOf(error)}`, { cause: error });
  }
  const headers: Record<string, string> = { accept: 'application/json', 'user-agent': userAgent };
  for (const [k, v] of Object.entries(auth.headers ?? {})) if (v !== undefined) headers[k.toLowerCase()] = String(v);
  if (typeof auth.auth === 'string') headers.authorization = `Basic ${Buffer.from(auth.auth).toString('base64')}`;
  return headers;
}
