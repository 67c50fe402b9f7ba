/**
 * The agent's unix socket, from before it listens until after it stops:
 * - prepared: its directory made (owner-only); refused (ALREADY_RUNNING) when a live agent
 *   answers there, and (IO_FAILURE) when the path is something else than a socket; a stale
 *   socket left by an agent that died is cleared;
 * - listened on with no instant at which another user could connect: created 0600;
 * - closed: no new connections, calls in flight given a bounded time to finish;
 * - removed only if the file is still the one this agent created (its inode): never another
 *   agent's that took the path meanwhile.
 */
import { chmodSync, existsSync, statSync, unlinkSync } from 'node:fs';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import { WarrenError } from '../../core/errors.ts';
import { makeDirectory } from '../../core/make-directory.ts';

/** How long calls in flight may take to finish when the agent stops. */
export const CLOSE_GRACE_MS = 10_000;

/** A socket this agent listens on; `remove` takes the file away if it is still this one. */
export interface OwnSocket {
  readonly path: string;
  remove(): void;
}

/** Prepares `path` and has `server` listen on it. */
export async function listenOnSocket(server: Server, path: string): Promise<OwnSocket> {
  await prepareSocket(path);
  await listen(server, path);
  const ino = statSync(path).ino;
  return {
    path,
    remove: () => {
      try {
        if (statSync(path).ino === ino) unlinkSync(path);
      } catch {
        // gone already
      }
    },
  };
}

/** Stops accepting; resolves once every connection has ended, cutting them after `graceMs`. */
export function closeServer(server: Server, graceMs = CLOSE_GRACE_MS): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/** Creates the socket's directory; refuses when a live agent answers there; clears a stale socket. */
async function prepareSocket(path: string): Promise<void> {
  const dir = dirname(path);
  makeDirectory(dir, 0o700);
  if (!existsSync(path)) return;
  if (!statSync(path).isSocket())
    throw new WarrenError('IO_FAILURE', `${path} exists and is not a socket; refusing to replace it`);
  const live = await new Promise<boolean>((resolve) => {
    const socket = connect(path);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
  if (live) throw new WarrenError('ALREADY_RUNNING', `an agent already answers on ${path}`);
  unlinkSync(path);
}

function listen(server: Server, path: string): Promise<void> {
  // The socket is created 0600 (umask) so there is no instant at which others could connect.
  const previous = process.umask(0o177);
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  }).finally(() => {
    process.umask(previous);
    if (existsSync(path)) chmodSync(path, 0o600);
  });
}
