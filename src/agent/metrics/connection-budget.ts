/**
 * How much of the agent an HTTP port may hold: the metrics address is reachable from wherever the
 * operator lets it be (on Kubernetes, the node's IP), and every connection costs a file
 * descriptor the agent's CNI socket and database also need. Without a bound, 1,100 idle TCP
 * connections under a 1,024-descriptor limit made every ADD fail.
 *
 * Guarantees, for a server given to `boundConnections`:
 * - At most `max` connections are open at once. A connection beyond that closes the one that has
 *   waited longest with no request in progress (idle between requests, or still sending its
 *   headers): idle connections never lock out a new one, so a probe gets through a flood of them.
 *   Only when every connection has a request in progress is the new one closed at once.
 * - A connection that carries no request in progress is closed after `idleMs` without a byte
 *   (one that connects and never sends anything included); one that trickles its headers is closed
 *   by `headersTimeout`, checked every `checkEveryMs` (Node checks every 30 s by default, which
 *   is what let slow-header connections outlive their bound).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionBounds {
  /** Connections open at once. */
  readonly max: number;
  /** Time to receive a request's headers, from the connection or the previous request's end. */
  readonly headersMs: number;
  /** Time to receive a whole request. */
  readonly requestMs: number;
  /** Time a connection may stay silent (no request in progress, no byte) before it is closed. */
  readonly idleMs: number;
  /** Time a kept-alive connection waits for its next request. */
  readonly keepAliveMs: number;
}

export const METRICS_CONNECTION_BOUNDS: ConnectionBounds = {
  max: 64,
  headersMs: 5_000,
  requestMs: 10_000,
  idleMs: 10_000,
  keepAliveMs: 5_000,
};

/** How often Node checks the header and request deadlines; it must be well under them. */
export const CHECK_EVERY_MS = 1_000;

/** The options `createServer` needs for `bounds` (its deadline checks must run often enough). */
export function serverOptionsFor(bounds: ConnectionBounds): {
  headersTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  connectionsCheckingInterval: number;
  maxHeaderSize: number;
} {
  return {
    headersTimeout: bounds.headersMs,
    requestTimeout: bounds.requestMs,
    keepAliveTimeout: bounds.keepAliveMs,
    connectionsCheckingInterval: CHECK_EVERY_MS,
    maxHeaderSize: 8 * 1024,
  };
}

/** Applies `bounds` to `server` (made with `serverOptionsFor(bounds)`). */
export function boundConnections(server: Server, bounds: ConnectionBounds): void {
  // Open connections in the order they last became idle (a Map keeps insertion order): the first
  // idle one is the one that has waited longest. The count is of requests in progress.
  const open = new Map<Socket, number>();
  server.timeout = bounds.idleMs;
  server.on('connection', (socket: Socket) => {
    if (open.size >= bounds.max) {
      let evicted = false;
      for (const [other, busy] of open) {
        if (busy > 0) continue;
        open.delete(other);
        other.destroy();
        evicted = true;
        break;
      }
      if (!evicted) {
        socket.destroy();
        return;
      }
    }
    open.set(socket, 0);
    socket.once('close', () => open.delete(socket));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const busy = open.get(socket);
    if (busy === undefined) return;
    open.set(socket, busy + 1);
    res.once('close', () => {
      const now = open.get(socket);
      if (now === undefined) return;
      // Idle again: to the end of the line, the last to be evicted.
      open.delete(socket);
      open.set(socket, now - 1);
    });
  });
}
