/**
 * The agent's HTTP address (--metrics-address; default 127.0.0.1:9464): plain HTTP on TCP, apart
 * from the agent's unix socket, serving what an operator or a kubelet reads and nothing that
 * changes state:
 *
 *   GET /livez, /healthz  liveness: 200 "ok" whenever the event loop turns; touches nothing
 *   GET /readyz           readiness: 200 "ok" when an ADD can commit now, else 503 with the reason
 *   GET /metrics          Prometheus text exposition
 *   GET /                 the dashboard, server-rendered (dashboard/page.ts)
 *   GET /fragment         the dashboard's content alone, which the page's script swaps in to refresh
 *   GET /dashboard.json   DashboardData, the same figures as JSON
 *   GET /dashboard.css, /dashboard.js   the page's style sheet and script
 *
 * Guarantees:
 * - Nothing on this port can starve the agent: connections, header and request time and idle
 *   time are bounded (connection-budget.ts), so descriptors stay for CNI calls.
 * - Only requests addressed to the agent are answered (DNS rebinding): a Host that is not an IP
 *   literal, `localhost` or the host the address was given as is refused with 421, so a page of
 *   another site whose name was pointed at this address cannot read it.
 * - Every answer forbids framing and loading anything from elsewhere (Content-Security-Policy),
 *   and allows no inline script or style, so markup slipped into the page cannot run.
 * - HEAD is answered like GET without a body; any other method is 405, any other path 404. A
 *   failing read answers 500 with the message, never crashes the agent.
 * - An address that cannot be bound (`serveMetrics`; taken by another process) is logged and
 *   reported in status and by `warren doctor`; the agent serves CNI calls regardless: a node must
 *   not lose its IPAM over its metrics port.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { nodeHttp } from '../../core/node-http.ts';
import { type AddressInfo, isIP } from 'node:net';
import { messageOf } from '../../core/errors.ts';
import type { DashboardData } from '../../api/dashboard.ts';
import type { MetricsEndpointStatus } from '../../api/status.ts';
import { type ListenAddress, formatListenAddress } from '../settings/listen-address.ts';
import {
  type ConnectionBounds,
  METRICS_CONNECTION_BOUNDS,
  boundConnections,
  serverOptionsFor,
} from './connection-budget.ts';

export interface MetricsServerOptions {
  readonly exposition: () => Promise<{ readonly contentType: string; readonly text: string }>;
  readonly dashboard: () => Promise<DashboardData>;
  readonly page: (data: DashboardData) => string;
  readonly fragment: (data: DashboardData) => string;
  /** The page's own resources by path (style sheet, script). */
  readonly assets?: ReadonlyMap<string, { readonly contentType: string; readonly body: string }>;
  /** Resolves when an ADD can commit now; rejects with the reason when not (the agent's readiness()). */
  readonly readiness: () => Promise<void>;
  /** Host names accepted besides IP literals and localhost: the host the address was given as. */
  readonly hostNames?: readonly string[];
  readonly bounds?: ConnectionBounds;
  /** Told of a request that failed, for the log. */
  readonly onError: (error: unknown, path: string) => void;
}

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
} as const;

const TEXT = 'text/plain; charset=utf-8';
const ROUTES = new Set(['/livez', '/healthz', '/readyz', '/metrics', '/', '/fragment', '/dashboard.json']);

export function createMetricsServer(options: MetricsServerOptions): Server {
  const bounds = options.bounds ?? METRICS_CONNECTION_BOUNDS;
  const server = nodeHttp.createServer(serverOptionsFor(bounds), (req, res) => {
    void answer(options, req, res).catch((error: unknown) => {
      options.onError(error, req.url ?? '/');
      if (!res.headersSent) send(res, req, 500, TEXT, `${messageOf(error)}\n`);
      else res.destroy();
    });
  });
  boundConnections(server, bounds);
  return server;
}

/** The host of a Host header ("h:port", "[v6]:port"), lower case; undefined when it has none. */
function hostOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const bracketed = /^\[([^\]]*)\](?::\d*)?$/.exec(header);
  if (bracketed !== null) return (bracketed[1] as string).toLowerCase();
  return header.replace(/:\d*$/, '').toLowerCase();
}

/**
 * Whether a request was addressed to the agent. No Host at all (HTTP/1.0) is no browser's, so
 * no rebinding. Names are compared without a trailing dot.
 */
export function hostAccepted(header: string | undefined, hostNames: readonly string[] = []): boolean {
  const host = hostOf(header);
  if (host === undefined) return true;
  if (isIP(host) !== 0) return true;
  const name = host.replace(/\.$/, '');
  return name === 'localhost' || hostNames.some((h) => h.toLowerCase().replace(/\.$/, '') === name);
}

async function answer(o: MetricsServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!hostAccepted(req.headers.host, o.hostNames)) {
    return send(
      res,
      req,
      421,
      TEXT,
      `misdirected request: this agent answers to its IP address or localhost, not to "${req.headers.host}" ` +
        `(a name that is not the agent's may be a DNS rebinding attempt)\n`,
    );
  }
  const path = new URL(req.url ?? '/', 'http://warren').pathname;
  const asset = o.assets?.get(path);
  const known = asset !== undefined || ROUTES.has(path);
  if (!known)
    return send(res, req, 404, TEXT, `not found: ${path} (try /, /metrics, /dashboard.json, /livez, /readyz)\n`);
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    return send(res, req, 405, TEXT, `${req.method} is not allowed; GET or HEAD\n`);
  }
  if (asset !== undefined) return send(res, req, 200, asset.contentType, asset.body);
  switch (path) {
    case '/livez':
    case '/healthz':
      // Answering at all is the proof: the event loop turns. Nothing else is asked.
      return send(res, req, 200, TEXT, 'ok\n');
    case '/readyz':
      try {
        await o.readiness();
      } catch (error) {
        return send(res, req, 503, TEXT, `${notReadyText(messageOf(error))}\n`);
      }
      return send(res, req, 200, TEXT, 'ok\n');
    case '/metrics': {
      const { contentType, text } = await o.exposition();
      return send(res, req, 200, contentType, text);
    }
  }
  const data = await o.dashboard();
  switch (path) {
    case '/':
      return send(res, req, 200, 'text/html; charset=utf-8', o.page(data));
    case '/fragment':
      return send(res, req, 200, 'text/html; charset=utf-8', o.fragment(data));
    default:
      return send(res, req, 200, 'application/json', `${JSON.stringify(data)}\n`);
  }
}

function send(res: ServerResponse, req: IncomingMessage, status: number, contentType: string, body: string): void {
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
  });
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

/** What serving the endpoint came to: the server, when it listens, and what status says of it. */
export interface ServedMetrics {
  readonly server: Server | undefined;
  readonly status: MetricsEndpointStatus;
}

/** Serves on `address`, or says why it cannot (logged too); never throws for the address. */
export async function serveMetrics(
  options: Omit<MetricsServerOptions, 'hostNames'>,
  address: ListenAddress,
  log: Logger,
): Promise<ServedMetrics> {
  const server = createMetricsServer({ ...options, hostNames: [address.host] });
  try {
    const bound = await listenMetrics(server, address);
    log.info({ address: bound }, 'metrics and dashboard served');
    return { server, status: { address: bound } };
  } catch (error) {
    const wanted = formatListenAddress(address);
    const message =
      'metrics and dashboard not served: cannot listen on --metrics-address ' +
      '(pass another, or an empty one to turn them off)';
    log.error({ err: error, address: wanted }, message);
    return { server: undefined, status: { address: wanted, error: `cannot listen on ${wanted}: ${messageOf(error)}` } };
  }
}

/**
 * /readyz's answer: the reason, said to be one of not being ready once. Some reasons say it
 * already (the readiness indicator's, a host-local takeover's: they are also STATUS 50's message).
 */
export function notReadyText(reason: string): string {
  return reason.startsWith('not ready') ? reason : `not ready: ${reason}`;
}
