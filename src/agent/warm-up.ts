/**
 * The warm-up: before the agent listens on its socket, it answers CNI calls of its own — ADD,
 * CHECK and DEL for made-up containers, then a GC — through the same HTTP server code, routes, CNI
 * service, allocator, engine and SQLite store class it serves with, on a throwaway in-memory
 * database and a private abstract unix socket. V8 compiles a function when it first runs and
 * optimises it after it has run many times: without this, the first pods after an agent start pay
 * for it (measured through the forwarder: the first ADD 7–12 ms, the next few 2–5 ms, then 1.2 ms;
 * a bench's p99 over 200 calls was those first calls).
 *
 * Nothing of it reaches the agent's state: its own store, no telemetry (metrics count only real
 * calls), no journal, no readiness indicator, a socket no file names. A failure is reported to the
 * caller, which logs it and goes on: a cold agent is slower, not wrong.
 */
import { request } from 'node:http';
import { ANSWER_HEADER, EXIT_HEADER } from '../api/cni-stdout.ts';
import { PATHS } from '../api/routes.ts';
import { Allocator } from '../allocator/allocator.ts';
import type { Clock } from '../core/clock.ts';
import { SqliteStore } from '../store/sqlite-store.ts';
import { createApiServer } from './api-server.ts';
import { CniService } from './cni-service.ts';
import type { AgentService } from './service.ts';

export interface WarmUpOptions {
  /** ADD/DEL rounds (a CHECK every tenth); the agent's --warm-up. */
  readonly rounds: number;
  readonly clock: Clock;
  readonly node: string;
  /** Only for the server's non-CNI routes, which the warm-up never calls. */
  readonly service: AgentService;
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
  const cni = new CniService({ allocator, readiness: async () => {}, storeKind: 'sqlite', clock: options.clock, gcGraceMs: 0 });
  let failure: unknown;
  const server = createApiServer({ cni, service: options.service, onError: (error) => (failure ??= error) });
  const socket = `\0warren-warm-up-${process.pid}-${Math.random().toString(36).slice(2)}`;
  let calls = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socket, () => resolve());
    });
    const call = async (command: string, containerID: string): Promise<void> => {
      calls++;
      const exit = await postCni(socket, { command, containerID, netns: `/var/run/netns/${containerID}`, ifname: 'eth0', args: '', config: CONFIG });
      if (exit !== 0) throw new Error(`warm-up ${command} answered exit ${exit}`);
    };
    for (let i = 0; i < options.rounds; i++) {
      const id = `warm-up-${i}`;
      await call('ADD', id);
      if (i % 10 === 0) await call('CHECK', id);
      await call('DEL', id);
    }
    if (failure !== undefined) throw failure;
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await store.close();
  }
  return { calls, ms: performance.now() - started };
}

/** One call as the forwarder makes it; resolves with the exit code the agent names. */
function postCni(socketPath: string, body: object): Promise<number> {
  const text = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method: 'POST', path: PATHS.cni, headers: { [ANSWER_HEADER]: 'stdout', 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(Number(res.headers[EXIT_HEADER] ?? NaN)));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(text);
  });
}
