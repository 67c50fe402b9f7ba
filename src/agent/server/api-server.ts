/**
 * The agent's API server: HTTP+JSON on a unix socket that only the agent's user can open (mode
 * 0600, set by the caller), so `curl --unix-socket` works and nothing else on the node can ask for
 * addresses. It serves the route table of api/routes.ts over the agent's services, and nothing
 * else: what each route takes and answers is api/protocol.ts.
 *
 * - A failed request answers `{error: {code, message}}` with the status of its code
 *   (api/errors.ts): never a status chosen by the message, never a code dropped.
 * - Only unexpected failures are reported to `onError` (for the log); a refusal of bad input, a
 *   "not ready" or a "try again" is an answer, not the agent's failure.
 * - A body past MAX_REQUEST_BYTES is refused (413) without being held in memory; a body that is
 *   not JSON is refused (400).
 * - POST /v1/cni with `X-Warren-Answer: stdout` (the native forwarder) is answered as the plugin's
 *   stdout (api/forwarded-call.ts): 200 with `X-Warren-Exit` and the bytes to print, or 200 with
 *   `X-Warren-Fallback` and no body when the TypeScript plugin must run the call itself. Every
 *   failure of such a call, a body too large included, is a fallback, never an error answer the
 *   forwarder would have to understand.
 * - At most `connectionsServedAtOnce` connections (one per CNI call) are served at once; the rest
 *   wait unread, first come first served (connection-gate.ts): a herd of calls is answered a slice
 *   at a time, never held whole.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { nodeHttp } from '../../core/node-http.ts';
import { WarrenError, isWarrenError, messageOf } from '../../core/errors.ts';
import { MAX_REQUEST_BYTES } from '../../api/limits.ts';
import { errorAnswer, httpStatusOf, isExpected } from '../../api/errors.ts';
import type { StdoutAnswer } from '../../api/cni-stdout.ts';
import { ANSWER_HEADER, forwardedAnswerBody, forwardedAnswerHeaders } from '../../api/cni-wire.ts';
import { answerForwardedCall } from '../../api/forwarded-call.ts';
import type { AgentApi } from '../../api/protocol.ts';
import { PATHS, matchRoute } from '../../api/routes.ts';
import type { CniService } from './cni-service.ts';
import { gateConnections } from './connection-gate.ts';
import type { AgentService } from './operator-service.ts';

export interface ApiServerOptions {
  readonly cni: CniService;
  /**
   * The agent's other routes (status, allocations, release, audit, nodes, ...). Absent: the
   * server answers CNI calls only and every other route NOT_FOUND (the warm-up's server, which
   * must never reach the live agent).
   */
  readonly service?: AgentService;
  /** Told of every request that failed unexpectedly, with its method and path. */
  readonly onError: (error: unknown, route: string) => void;
  /** Largest request body read; default MAX_REQUEST_BYTES (a CNI call with the largest config). */
  readonly maxBodyBytes?: number;
  /** Connections served at once, the rest waiting (connection-gate.ts); default CONNECTIONS_SERVED_AT_ONCE. */
  readonly connectionsServedAtOnce?: number;
}

/** The agent's services as the one API the routes run against; without a service, CNI calls only. */
export function agentApi(cni: CniService, service: AgentService | undefined): AgentApi {
  if (service === undefined) return cniOnly(cni);
  return {
    cni: (request) => cni.handle(request),
    status: () => service.status(),
    pools: () => service.pools(true), // `warren pools`: shared ranges across the cluster too
    allocations: (query) => service.allocations(query),
    allocationsPage: (query, page) => service.allocationsPage(query, page),
    release: (request) => service.release(request),
    audit: (request) => service.audit(request.fix),
    journal: async () => service.journal(),
    nodes: () => service.nodes(),
    reservations: () => service.reservations(),
    forgetNode: (request) => service.forgetNode(request.node),
    acceptStore: () => service.acceptStore(),
    plugins: async () => service.plugins(),
    doctor: () => service.doctor(),
    uninstall: () => service.uninstall(),
  };
}

function cniOnly(cni: CniService): AgentApi {
  const absent = (): Promise<never> =>
    Promise.reject(new WarrenError('NOT_FOUND', 'this server answers CNI calls only'));
  return {
    cni: (request) => cni.handle(request),
    status: absent,
    pools: absent,
    allocations: absent,
    allocationsPage: absent,
    release: absent,
    audit: absent,
    journal: absent,
    nodes: absent,
    reservations: absent,
    forgetNode: absent,
    acceptStore: absent,
    plugins: absent,
    doctor: absent,
    uninstall: absent,
  };
}

export function createApiServer(options: ApiServerOptions): Server {
  const api = agentApi(options.cni, options.service);
  const maxBodyBytes = options.maxBodyBytes ?? MAX_REQUEST_BYTES;
  const server = nodeHttp.createServer((req, res) => {
    if (
      req.method === 'POST' &&
      req.headers[ANSWER_HEADER] === 'stdout' &&
      new URL(req.url ?? '/', 'http://warren').pathname === PATHS.cni
    ) {
      void answerAsStdout(api, maxBodyBytes, req).then(
        (answer) => sendStdout(res, answer),
        (error: unknown) => {
          if (!isWarrenError(error, 'TOO_LARGE')) options.onError(error, `${req.method} ${req.url} (stdout)`);
          sendStdout(res, {
            kind: 'plugin',
            reason: isWarrenError(error, 'TOO_LARGE') ? 'request-too-large' : 'agent-failure',
            why: messageOf(error),
          });
        },
      );
      return;
    }
    void serve(api, maxBodyBytes, req, res).catch((error: unknown) => {
      if (!isExpected(error)) options.onError(error, `${req.method} ${req.url}`);
      send(res, httpStatusOf(error), errorAnswer(error));
    });
  });
  // A CNI call waits on the store; keep-alive connections from the CLI are not held open.
  server.keepAliveTimeout = 1_000;
  gateConnections(server, options.connectionsServedAtOnce);
  return server;
}

async function serve(api: AgentApi, maxBodyBytes: number, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://warren');
  const match = matchRoute(req.method, url.pathname);
  switch (match.kind) {
    case 'found': {
      const body = match.route.method === 'POST' ? await readJson(req, maxBodyBytes) : undefined;
      return send(res, 200, await match.route.serve(api, { query: url.searchParams, body }));
    }
    case 'wrong-method':
      res.setHeader('allow', match.allowed.join(', '));
      throw new WarrenError(
        'METHOD_NOT_ALLOWED',
        `${url.pathname} takes ${match.allowed.join(' or ')}, not ${req.method}`,
      );
    case 'not-found':
      throw new WarrenError('NOT_FOUND', `no route ${req.method} ${url.pathname}`);
    default: {
      const never: never = match;
      throw new Error(`unhandled route match ${JSON.stringify(never)}`);
    }
  }
}

async function answerAsStdout(api: AgentApi, maxBodyBytes: number, req: IncomingMessage): Promise<StdoutAnswer> {
  return answerForwardedCall(api, await readBody(req, maxBodyBytes));
}

function sendStdout(res: ServerResponse, answer: StdoutAnswer): void {
  if (res.headersSent) return;
  res.writeHead(200, forwardedAnswerHeaders(answer));
  res.end(forwardedAnswerBody(answer));
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const body = await readBody(req, maxBytes);
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new WarrenError('BAD_REQUEST', `request body is not valid JSON: ${(error as Error).message}`);
  }
}

/** The request's body, whole; TOO_LARGE past `maxBytes`, which are never held. */
function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        reject(new WarrenError('TOO_LARGE', `request body is larger than ${maxBytes} bytes`));
        // Drain the rest unread, so the answer can still be written on this connection.
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => resolve(Buffer.concat(chunks, size)));
  });
}
