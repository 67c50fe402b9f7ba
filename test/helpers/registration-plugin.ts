/**
 * A test plugin: serves kubelet's Registration service (GetInfo, NotifyRegistrationStatus) on any
 * number of unix sockets, each with its own PluginInfo and behaviour, and records what happens to
 * it (socket listening, GetInfo asked, a call cancelled, the status Warren notified) with the time,
 * so tests can measure from the moment a socket appeared.
 *
 * Two ways to use it:
 * - in-process: `serveRegistration(specs, onRecord)` (the client's tests);
 * - as a real process: `RegistrationPluginProcess.start(specs)` spawns this file with
 *   `process.execPath`; the child prints one JSON record per line on stdout and, on SIGTERM,
 *   closes its servers and removes its sockets (the e2e tests).
 *
 * Every socket is bound at a dot-name beside its path (which a registry ignores) and all of them
 * are then renamed into place in one synchronous burst, so a socket appears only once it answers
 * and "N plugins appear at once" is literal. A record's `at` is `Date.now()` in the plugin's
 * process, taken right after the rename (for `listening`). Closing removes a socket only while it
 * is still the one this plugin put there.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type ServiceDefinition,
  type sendUnaryData,
} from '@grpc/grpc-js';
import {
  EMPTY,
  METHODS,
  type PluginInfo,
  type RegistrationStatus,
  decodeStatus,
  encodeInfo,
} from '../../src/api/plugins/wire.ts';
import { HANG_BOUND_MS, track, untilReady } from './processes.ts';

export interface SocketSpec {
  readonly socket: string;
  readonly info: PluginInfo;
  /** How GetInfo answers: with `info` (default), never, or with bytes that are no PluginInfo. */
  readonly getInfo?: 'answer' | 'mute' | 'garbage';
  /** How NotifyRegistrationStatus answers: at once (default) or never. */
  readonly notify?: 'answer' | 'mute';
}

export type PluginRecord =
  | { readonly event: 'listening'; readonly socket: string; readonly at: number }
  | { readonly event: 'get-info'; readonly socket: string; readonly at: number }
  | { readonly event: 'cancelled'; readonly socket: string; readonly method: string; readonly at: number }
  | {
      readonly event: 'notify';
      readonly socket: string;
      readonly registered: boolean;
      readonly error: string;
      readonly at: number;
    }
  | { readonly event: 'failed'; readonly error: string; readonly at: number };

/** No protobuf message: a varint that runs off the end. */
const GARBAGE = Buffer.from([0xff, 0xff, 0xff]);

const identity = (bytes: Buffer): Buffer => bytes;

const REGISTRATION: ServiceDefinition = {
  GetInfo: {
    path: METHODS.getInfo,
    requestStream: false,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
  NotifyRegistrationStatus: {
    path: METHODS.notifyRegistrationStatus,
    requestStream: false,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
};

export interface Served {
  /** Stops every server and removes the sockets. */
  close(): Promise<void>;
}

/** Serves every spec; resolves once all sockets are in place (and recorded `listening`). */
export async function serveRegistration(
  specs: readonly SocketSpec[],
  record: (r: PluginRecord) => void,
): Promise<Served> {
  const servers: Server[] = [];
  const bound: Array<{ readonly spec: SocketSpec; readonly temp: string }> = [];
  /** The inode each socket had once in place: a socket another plugin put over it is not ours to remove. */
  const placed = new Map<string, number>();
  const close = async (): Promise<void> => {
    // Forced: a mute plugin's calls never end, and a graceful shutdown would wait for them.
    for (const server of servers) server.forceShutdown();
    for (const { spec, temp } of bound) {
      rmSync(temp, { force: true });
      const ino = inodeOf(spec.socket);
      if (ino !== undefined && ino === placed.get(spec.socket)) rmSync(spec.socket, { force: true });
    }
  };
  try {
    await Promise.all(
      specs.map(async (spec) => {
        const server = new Server();
        servers.push(server);
        server.addService(REGISTRATION, {
          GetInfo(call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) {
            record({ event: 'get-info', socket: spec.socket, at: Date.now() });
            call.on('cancelled', () =>
              record({ event: 'cancelled', socket: spec.socket, method: 'GetInfo', at: Date.now() }),
            );
            switch (spec.getInfo ?? 'answer') {
              case 'answer':
                done(null, encodeInfo(spec.info));
                return;
              case 'garbage':
                done(null, GARBAGE);
                return;
              case 'mute':
                return;
            }
          },
          NotifyRegistrationStatus(call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) {
            const status: RegistrationStatus | string = decodeStatus(call.request);
            const at = Date.now();
            if (typeof status === 'string') record({ event: 'failed', error: status, at });
            else
              record({ event: 'notify', socket: spec.socket, registered: status.registered, error: status.error, at });
            call.on('cancelled', () =>
              record({ event: 'cancelled', socket: spec.socket, method: 'NotifyRegistrationStatus', at: Date.now() }),
            );
            if ((spec.notify ?? 'answer') === 'answer') done(null, EMPTY);
          },
        });
        mkdirSync(dirname(spec.socket), { recursive: true });
        const temp = join(dirname(spec.socket), `.${basename(spec.socket)}.binding`);
        rmSync(temp, { force: true });
        await new Promise<void>((resolve, reject) =>
          server.bindAsync(`unix://${temp}`, ServerCredentials.createInsecure(), (error) =>
            error ? reject(error) : resolve(),
          ),
        );
        bound.push({ spec, temp });
      }),
    );
  } catch (error) {
    await close();
    throw error;
  }
  // All in place in one burst: the sockets appear together, each already answering.
  const at: number[] = [];
  for (const { spec, temp } of bound) {
    renameSync(temp, spec.socket);
    at.push(Date.now());
  }
  for (const { spec } of bound) placed.set(spec.socket, inodeOf(spec.socket) ?? -1);
  bound.forEach(({ spec }, i) => record({ event: 'listening', socket: spec.socket, at: at[i] as number }));
  return { close };
}

function inodeOf(path: string): number | undefined {
  try {
    return statSync(path).ino;
  } catch {
    return undefined;
  }
}

const HERE = fileURLToPath(import.meta.url);

/** The test plugin as a real process (this file, run by the same node). */
export class RegistrationPluginProcess {
  readonly child: ChildProcess;
  readonly records: PluginRecord[] = [];
  readonly #exited: Promise<void>;
  #stderr = '';

  private constructor(child: ChildProcess) {
    this.child = child;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    child.stderr?.on('data', (chunk: Buffer) => (this.#stderr += chunk.toString('utf8')));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      try {
        this.records.push(JSON.parse(line) as PluginRecord);
      } catch {
        this.#stderr += `(unparsable stdout) ${line}\n`;
      }
    });
  }

  /** Spawns the plugin; resolves once every socket is listening. */
  static async start(specs: readonly SocketSpec[], deadlineMs = HANG_BOUND_MS): Promise<RegistrationPluginProcess> {
    const child = track(spawn(process.execPath, [HERE, JSON.stringify(specs)], { stdio: ['ignore', 'pipe', 'pipe'] }));
    const plugin = new RegistrationPluginProcess(child);
    // A plugin that does not come up is killed: it would keep the test file alive.
    await untilReady(child, () =>
      plugin.until(
        `${specs.length} sockets listening`,
        (records) => records.filter((r) => r.event === 'listening').length === specs.length,
        deadlineMs,
      ),
    );
    return plugin;
  }

  get pid(): number {
    return this.child.pid as number;
  }

  /** When the plugin made the socket appear (its clock: Date.now()). */
  listeningAt(socket: string): number {
    const r = this.records.find((x) => x.event === 'listening' && x.socket === socket);
    if (r === undefined) throw new Error(`${socket} never listened`);
    return r.at;
  }

  notified(socket: string): Array<Extract<PluginRecord, { event: 'notify' }>> {
    return this.records.filter(
      (r): r is Extract<PluginRecord, { event: 'notify' }> => r.event === 'notify' && r.socket === socket,
    );
  }

  /** Waits (polling, with a deadline) until `done` holds for the records so far. */
  async until(
    what: string,
    done: (records: readonly PluginRecord[]) => boolean,
    deadlineMs = HANG_BOUND_MS,
  ): Promise<void> {
    const end = Date.now() + deadlineMs;
    while (!done(this.records)) {
      if (this.child.exitCode !== null || this.child.signalCode !== null)
        throw new Error(`the test plugin exited while waiting for ${what}: ${this.#stderr}`);
      if (Date.now() > end)
        throw new Error(
          `timed out after ${deadlineMs} ms waiting for ${what}; records: ${JSON.stringify(this.records)}; stderr: ${this.#stderr}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** SIGTERM (the plugin removes its sockets), then SIGKILL if it has not gone within 5 s. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    const killer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await this.#exited;
    clearTimeout(killer);
  }
}

async function main(): Promise<void> {
  const specs = JSON.parse(process.argv[2] ?? '[]') as SocketSpec[];
  const print = (r: PluginRecord): void => {
    process.stdout.write(`${JSON.stringify(r)}\n`);
  };
  const served = await serveRegistration(specs, print);
  const stop = (): void => {
    void served.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (import.meta.main) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
