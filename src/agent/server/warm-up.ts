/**
 * The warm-up: the agent answers CNI calls of its own — ADD, CHECK and DEL for made-up
 * containers, then nothing else — through the same HTTP server code, CNI route, CNI service,
 * allocator, engine and SQLite store class it serves with, on a throwaway in-memory database. V8
 * compiles a function when it first runs and optimises it after it has run many times: without
 * this, the first pods after an agent start pay for it (measured through the forwarder: the first
 * ADD 7–12 ms, the next few 2–5 ms, then 1.2 ms; a bench's p99 over 200 calls was those first
 * calls). The agent runs ROUNDS_BEFORE_SERVING rounds before it serves, which take the first
 * calls' compiling, and the rest beside serving: the whole warm-up costs more CPU than the rest of
 * a start (about 0.25 s against 0.2 s). Beside serving it gives way to real calls (LiveTraffic):
 * it makes no call while one is in flight or while they keep coming (one in the last QUIET_MS),
 * so pods that come right after a start never share the CPU with it (that doubled their p99 on a
 * loaded machine); they warm the path up themselves.
 *
 * Nothing of it reaches the agent or is reachable by anyone:
 * - no socket: each call is an HTTP exchange over an in-process stream pair handed to the server
 *   (duplexPair), so there is no name in /proc/net/unix, nothing another user or a hostNetwork
 *   pod can connect to. (It used to listen on an abstract unix socket, which has no owner or mode,
 *   with the live routes behind it: anyone could release a live container's address.)
 * - its server has the CNI route only (server/api-server.ts without a service): status, allocations,
 *   release, audit and the node routes answer NOT_FOUND, and the CNI route reaches its own store;
 * - its own store, no telemetry (metrics count only real calls), no journal, no readiness
 *   indicator.
 * A failure is reported to the caller, which logs it and goes on: a cold agent is slower, not
 * wrong. An aborted signal stops it between two calls.
 */
import type { Server } from 'node:http';
import { duplexPair } from 'node:stream';
import { nodeHttp } from '../../core/node-http.ts';
import { ANSWER_HEADER, EXIT_HEADER } from '../../api/cni-stdout.ts';
import { PATHS } from '../../api/routes.ts';
import { Allocator } from '../../allocator/allocator.ts';
import type { Clock } from '../../core/clock.ts';
import { SqliteStore } from '../../store/sqlite/store.ts';
import { createApiServer } from './api-server.ts';
import { CniService } from './cni-service.ts';

/**
 * Rounds the agent runs before it serves: the first calls compile the ADD path (the first ADD cost
 * 7–12 ms, the next few 2–5 ms); five rounds (eleven calls) cost about 40 ms of CPU.
 */
export const ROUNDS_BEFORE_SERVING = 1;

export interface WarmUpOptions {
  /** ADD/DEL rounds (a CHECK every tenth); the agent's --warm-up. */
  readonly rounds: number;
  readonly clock: Clock;
  readonly node: string;
  /** Stops the warm-up before its next call (the agent is stopping). */
  readonly signal?: AbortSignal;
  /** Real calls are coming (LiveTraffic.busy): the next call waits until they stop. */
  readonly busy?: () => boolean;
}

/** How long the live server must have had no request before the warm-up makes its next call. */
export const QUIET_MS = 20;

/**
 * Whether the live server is answering real calls: one in flight, or one began since the last
 * ask. Counts requests by the server's own events; no timestamps (nothing to go backwards).
 */
export class LiveTraffic {
  #inFlight = 0;
  #began = false;

  constructor(server: Server) {
    server.on('request', (_request, response: { once(event: 'close', fn: () => void): unknown }) => {
      this.#inFlight++;
      this.#began = true;
      response.once('close', () => this.#inFlight--);
    });
  }

  busy(): boolean {
    const busy = this.#inFlight > 0 || this.#began;
    this.#began = false;
    return busy;
  }
}

export interface WarmUpReport {
  readonly calls: number;
  readonly ms: number;
}

// A network no runtime uses and RFC 2544's benchmarking range: the answers stay in this module.
const NETWORK = 'warren-warm-up';
const CONFIG = { cniVersion: '1.1.0', name: NETWORK, ipam: { type: 'warren', range: '198.18.0.0/15' } };

export async function warmUp(options: WarmUpOptions): Promise<WarmUpReport> {
  const started = performance.now();
  if (options.rounds <= 0) return { calls: 0, ms: 0 };
  const store = new SqliteStore({ path: ':memory:', clock: options.clock });
  const allocator = new Allocator({ store, clock: options.clock, node: options.node, blocks: false });
  const cni = new CniService({
    allocator,
    readiness: async () => {},
    storeKind: 'sqlite',
    clock: options.clock,
    gcGraceMs: 0,
  });
  let failure: unknown;
  const server = warmUpServer(cni, (error) => (failure ??= error));
  let calls = 0;
  try {
    const call = async (command: string, containerID: string): Promise<void> => {
      calls++;
      const exit = await postCni(server, {
        command,
        containerID,
        netns: `/var/run/netns/${containerID}`,
        ifname: 'eth0',
        args: '',
        config: CONFIG,
      });
      if (exit !== 0) throw new Error(`warm-up ${command} answered exit ${exit}`);
    };
    const stopped = (): boolean => options.signal?.aborted === true;
    // A wait that the agent's stop ends at once (its clock may be one a test steps by hand).
    const quiet = (): Promise<void> =>
      new Promise((resolve) => {
        const done = (): void => {
          cancel();
          options.signal?.removeEventListener('abort', done);
          resolve();
        };
        const cancel = options.clock.setTimer(QUIET_MS, done);
        options.signal?.addEventListener('abort', done, { once: true });
      });
    for (let i = 0; i < options.rounds && !stopped(); i++) {
      while (options.busy?.() === true && !stopped()) await quiet();
      if (stopped()) break;
      const id = `warm-up-${i}`;
      await call('ADD', id);
      if (i % 10 === 0) await call('CHECK', id);
      await call('DEL', id);
    }
    if (failure !== undefined) throw failure;
  } finally {
    await store.close();
  }
  return { calls, ms: performance.now() - started };
}

/**
 * The warm-up's server: the agent's API server code with the CNI route only, never listening.
 * Exported for the test that it serves no other route.
 */
export function warmUpServer(cni: CniService, onError: (error: unknown) => void): Server {
  return createApiServer({ cni, onError });
}

/**
 * One call as the forwarder makes it, over a stream pair handed to `server` as a connection;
 * resolves with the status, the exit code the agent names and the body.
 */
export function exchange(
  server: Server,
  method: 'GET' | 'POST',
  path: string,
  body?: object,
  headers: Record<string, string> = {},
): Promise<{ status: number; exit: number; body: string }> {
  const text = body === undefined ? '' : JSON.stringify(body);
  const [client, serverEnd] = duplexPair();
  server.emit('connection', serverEnd);
  return new Promise<{ status: number; exit: number; body: string }>((resolve, reject) => {
    const req = nodeHttp.request(
      {
        createConnection: () => client,
        method,
        path,
        headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            exit: Number(res.headers[EXIT_HEADER] ?? NaN),
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(text);
  }).finally(() => {
    client.destroy();
    serverEnd.destroy();
  });
}

async function postCni(server: Server, body: object): Promise<number> {
  return (await exchange(server, 'POST', PATHS.cni, body, { [ANSWER_HEADER]: 'stdout' })).exit;
}
