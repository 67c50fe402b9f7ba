/**
 * The metrics address: plain HTTP on TCP (default 127.0.0.1:9464), apart from the agent's unix
 * socket, serving what an operator reads and nothing that changes state:
 *
 *   GET /metrics          Prometheus text exposition
 *   GET /                 the dashboard, server-rendered (dashboard/page.ts)
 *   GET /fragment         the dashboard's content alone, which the page's script swaps in to refresh
 *   GET /dashboard.json   DashboardData, the same figures as JSON
 *
 * Every answer forbids framing and loading anything from elsewhere (Content-Security-Policy), so
 * the page makes no request outside the agent. HEAD is answered like GET without a body; any other
 * method is 405, any other path 404. A failing read answers 500 with the message, never crashes
 * the agent.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { nodeHttp } from '../../core/node-http.ts';
import type { AddressInfo } from 'node:net';
import { messageOf } from '../../core/errors.ts';
import type { DashboardData } from '../../api/dashboard.ts';
import { type ListenAddress, formatListenAddress } from '../listen-address.ts';

export interface MetricsServerOptions {
  readonly exposition: () => Promise<{ readonly contentType: string; readonly text: string }>;
  readonly dashboard: () => Promise<DashboardData>;
  readonly page: (data: DashboardData) => string;
  readonly fragment: (data: DashboardData) => string;
  /** Told of a request that failed, for the log. */
  readonly onError: (error: unknown, path: string) => void;
}

const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
} as const;

export function createMetricsServer(options: MetricsServerOptions): Server {
  const server = nodeHttp.createServer((req, res) => {
    void answer(options, req, res).catch((error: unknown) => {
      options.onError(error, req.url ?? '/');
      if (!res.headersSent) send(res, req, 500, 'text/plain; charset=utf-8', `${messageOf(error)}\n`);
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 5_000;
  // A slow or stalled client must not hold a connection for ever.
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  return server;
}

async function answer(o: MetricsServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = new URL(req.url ?? '/', 'http://warren').pathname;
  const known = path === '/metrics' || path === '/' || path === '/fragment' || path === '/dashboard.json';
  if (!known) return send(res, req, 404, 'text/plain; charset=utf-8', `not found: ${path} (try /, /metrics, /dashboard.json)\n`);
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    return send(res, req, 405, 'text/plain; charset=utf-8', `${req.method} is not allowed; GET or HEAD\n`);
  }
  switch (path) {
    case '/metrics': {
      const { contentType, text } = await o.exposition();
      return send(res, req, 200, contentType, text);
    }
    case '/':
      return send(res, req, 200, 'text/html; charset=utf-8', o.page(await o.dashboard()));
    case '/fragment':
      return send(res, req, 200, 'text/html; charset=utf-8', o.fragment(await o.dashboard()));
    default:
      return send(res, req, 200, 'application/json', `${JSON.stringify(await o.dashboard())}\n`);
  }
}

function send(res: ServerResponse, req: IncomingMessage, status: number, contentType: string, body: string): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(req.method === 'HEAD' ? undefined : body);
}

/** Listens on `address`; resolves with the address bound (port 0 resolved). */
export function listenMetrics(server: Server, address: ListenAddress): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      const bound = server.address() as AddressInfo;
      resolve(formatListenAddress({ host: bound.address, port: bound.port }));
    });
  });
}
