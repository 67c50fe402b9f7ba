/**
 * The agent's API: HTTP+JSON on a unix socket that only the agent's user can open (mode 0600), so
 * `curl --unix-socket` works and nothing else on the node can ask for addresses.
 *
 *   POST /v1/cni          a CNI call from the plugin       -> 200 {kind: result|silent|error, ...}
 *   GET  /v1/status       agent and store state
 *   GET  /v1/pools        utilisation per pool
 *   GET  /v1/allocations  ?pool=&network=&containerID=&ifname=&podNamespace=&podName=&podUID=&node=&address=
 *   POST /v1/release      {pool, address} or {containerID, network?, ifname?}
 *   GET  /v1/audit        every allocation judged; POST /v1/audit {fix: true} also releases the stale
 *   GET  /v1/journal      pending and rejected missed-delete intents, last reconcile
 *   GET  /v1/nodes        nodes sharing the store (cluster store), their blocks and allocations
 *   POST /v1/nodes/forget {node}: free what a dead node held; refused while it is alive
 *
 * Errors outside CNI calls are {error: {code, message}} with a 4xx/5xx status.
 */
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { WarrenError, isWarrenError, messageOf } from '../core/errors.ts';
import { MAX_REQUEST_BYTES } from '../core/limits.ts';
import type { CniHandler } from '../cni/handler.ts';
import type { AllocationFilter } from '../store/store.ts';
import type { AgentService } from './service.ts';

/** A CNI call carries a whole network config: the limit is the plugin's, with room for its envelope. */
const MAX_BODY_BYTES = MAX_REQUEST_BYTES;

const FILTER_KEYS: ReadonlyArray<keyof AllocationFilter> = ['pool', 'network', 'containerID', 'ifname', 'podNamespace', 'podName', 'podUID', 'node', 'address'];

export interface ApiServerOptions {
  readonly cni: CniHandler;
  readonly service: AgentService;
  readonly onError: (error: unknown, route: string) => void;
}

export function createApiServer(options: ApiServerOptions): Server {
  const server = createServer((req, res) => {
    void route(options, req, res).catch((error: unknown) => {
      options.onError(error, `${req.method} ${req.url}`);
      send(res, 500, { error: { code: 'INTERNAL', message: messageOf(error) } });
    });
  });
  // A CNI call waits on the store; keep-alive connections from the CLI are not held open.
  server.keepAliveTimeout = 1_000;
  return server;
}

async function route(options: ApiServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://warren');
  const key = `${req.method} ${url.pathname}`;
  try {
    switch (key) {
      case 'POST /v1/cni': {
        const body = await readJson(req);
        return send(res, 200, await options.cni.handle(body as never));
      }
      case 'GET /v1/status':
        return send(res, 200, await options.service.status());
      case 'GET /v1/pools':
        return send(res, 200, await options.service.pools());
      case 'GET /v1/allocations': {
        const filter: Record<string, string> = {};
        for (const [name, value] of url.searchParams) {
          if (!(FILTER_KEYS as readonly string[]).includes(name)) throw new WarrenError('BAD_REQUEST', `unknown filter "${name}"; filters are ${FILTER_KEYS.join(', ')}`);
          filter[name] = value;
        }
        return send(res, 200, await options.service.allocations(filter));
      }
      case 'POST /v1/release':
        return send(res, 200, await options.service.release(await readJson(req)));
      case 'GET /v1/audit':
        return send(res, 200, await options.service.audit(false));
      case 'POST /v1/audit': {
        const body = await readJson(req);
        const fix = typeof body === 'object' && body !== null && (body as { fix?: unknown }).fix;
        if (typeof fix !== 'boolean') throw new WarrenError('BAD_REQUEST', 'audit needs {"fix": true|false}');
        return send(res, 200, await options.service.audit(fix));
      }
      case 'GET /v1/journal':
        return send(res, 200, options.service.journal());
      case 'GET /v1/nodes':
        return send(res, 200, await options.service.nodes());
      case 'POST /v1/nodes/forget':
        return send(res, 200, await options.service.forgetNode(await readJson(req)));
      default:
        return send(res, knownPath(url.pathname) ? 405 : 404, { error: { code: 'NOT_FOUND', message: `no route ${key}` } });
    }
  } catch (error) {
    if (isWarrenError(error, 'BAD_REQUEST') || isWarrenError(error, 'DECODE_FAILURE')) {
      return send(res, error.message.includes('larger than') ? 413 : 400, { error: { code: error.code, message: error.message } });
    }
    throw error;
  }
}

function knownPath(path: string): boolean {
  return ['/v1/cni', '/v1/status', '/v1/pools', '/v1/allocations', '/v1/release', '/v1/audit', '/v1/journal', '/v1/nodes', '/v1/nodes/forget'].includes(path);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new WarrenError('BAD_REQUEST', `request body is larger than ${MAX_BODY_BYTES} bytes`));
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (error) {
        reject(new WarrenError('BAD_REQUEST', `request body is not valid JSON: ${messageOf(error)}`));
      }
    });
  });
}
