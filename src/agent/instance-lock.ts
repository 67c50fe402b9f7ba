/**
 * One agent per node: the single writer of the node's allocations. Each thing that must have one
 * agent — the state directory, the database, the API socket — is locked by listening on an
 * abstract unix socket named after its canonical path.
 *
 * Why not a PID file: a PID file left by a dead agent names a PID the kernel may have given to an
 * unrelated process since (after a reboot, nearly always), and two starters that both find a dead
 * PID can both take over. An abstract socket has neither problem: binding is atomic, so of two
 * starters exactly one wins, and the kernel frees the name the instant its holder dies, kill -9
 * included, so there is never a stale lock to judge. It leaves no file behind.
 *
 * Whoever connects to a lock is told the holder's PID and what it holds, for the refusal message.
 * Abstract sockets belong to a network namespace: agents run in the host's (hostNetwork).
 */
import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { type Server, connect, createServer } from 'node:net';
import { basename, dirname, join, resolve } from 'node:path';
import { WarrenError } from '../core/errors.ts';

/** What is locked: a human name ("state directory") and its path. */
export interface LockedResource {
  readonly what: string;
  readonly path: string;
}

interface Holder {
  readonly pid: number;
  readonly what: string;
  readonly path: string;
}

/** The path with every existing directory resolved, so two spellings of one file are one lock. */
export function canonicalPath(path: string): string {
  const absolute = resolve(path);
  try {
    return realpathSync(absolute);
  } catch {
    // Not there yet (a database about to be created): canonicalise what exists above it.
    const parent = dirname(absolute);
    return parent === absolute ? absolute : join(canonicalPath(parent), basename(absolute));
  }
}

/** The abstract socket name of a lock ("\0" prefix: not a file). */
export function lockName(resource: LockedResource): string {
  const digest = createHash('sha256').update(`${resource.what}\0${canonicalPath(resource.path)}`).digest('hex').slice(0, 40);
  return `\0warren-agent-lock-${digest}`;
}

function listenOn(name: string, holder: Holder): Promise<Server | undefined> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.end(JSON.stringify(holder));
  });
  return new Promise((resolvePromise, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') resolvePromise(undefined);
      else reject(new WarrenError('IO_FAILURE', `could not take the agent lock for the ${holder.what} ${holder.path}: ${error.message}`, { cause: error }));
    });
    server.listen({ path: name }, () => {
      server.unref();
      resolvePromise(server);
    });
  });
}

/** Asks the holder of a lock who it is; undefined when it does not say within a second. */
function askHolder(name: string): Promise<Holder | undefined> {
  return new Promise((resolvePromise) => {
    const socket = connect({ path: name });
    let text = '';
    const done = (holder: Holder | undefined): void => {
      clearTimeout(timer);
      socket.destroy();
      resolvePromise(holder);
    };
    const timer = setTimeout(() => done(undefined), 1_000);
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    socket.on('end', () => {
      try {
        done(JSON.parse(text) as Holder);
      } catch {
        done(undefined);
      }
    });
    socket.on('error', () => done(undefined));
  });
}

export class InstanceLock {
  readonly #servers: Server[];

  private constructor(servers: Server[]) {
    this.#servers = servers;
  }

  /**
   * Takes every lock, or none: refuses with ALREADY_RUNNING, naming the holder's PID and what it
   * holds, when another agent holds any of them.
   */
  static async acquire(resources: readonly LockedResource[]): Promise<InstanceLock> {
    const servers: Server[] = [];
    for (const resource of resources) {
      const name = lockName(resource);
      const server = await listenOn(name, { pid: process.pid, what: resource.what, path: canonicalPath(resource.path) });
      if (server !== undefined) {
        servers.push(server);
        continue;
      }
      await new InstanceLock(servers).release();
      const holder = await askHolder(name);
      const who = holder === undefined ? 'another Warren agent' : `another Warren agent (pid ${holder.pid})`;
      throw new WarrenError('ALREADY_RUNNING', `${who} already uses the ${resource.what} ${resource.path}; one agent per node`);
    }
    return new InstanceLock(servers);
  }

  async release(): Promise<void> {
    await Promise.all(this.#servers.map((server) => new Promise<void>((resolvePromise) => server.close(() => resolvePromise()))));
    this.#servers.length = 0;
  }
}
