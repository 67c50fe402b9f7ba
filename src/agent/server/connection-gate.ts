/**
 * Back-pressure on the agent's socket: at most `limit` connections are served at once; the others
 * wait paused, in the order they came, with their requests unread in the kernel's socket buffers,
 * until a served one closes. The plugin (and the native forwarder) opens one connection per call,
 * so this bounds the calls in flight: a node-reboot herd (1,000 ADDs at once, 250 pods × 4
 * networks) is answered a slice at a time instead of being read, parsed and held whole, each
 * waiting call costing a socket and not a parser, a request and its work.
 *
 * Guarantees:
 * - never more than `limit` connections are read from at once;
 * - waiting connections are admitted first come, first served, each as soon as a slot frees;
 * - a served connection that closes gives its slot up at once, so a caller that gave up holds
 *   none; a waiting one is not read, so its close is seen when its turn comes (a whole request it
 *   left is still answered, to no one: ADD is idempotent per attachment, and the runtime's retry
 *   gets the same address, as when a slow agent answers a caller that gave up);
 * - nothing is refused or closed here: a waiting call is answered late, never failed. Each call
 *   still has its own deadline (the forwarder's AGENT_ANSWER_TIMEOUT_MS, 30 s), from its connect:
 *   a herd is drained well inside it (see bench/footprint.ts).
 */
import type { Server, Socket } from 'node:net';

/** Connections the agent's socket serves at once unless told otherwise. */
export const CONNECTIONS_SERVED_AT_ONCE = 32;

/** Gates `server`'s connections, `limit` served at once; answers how many are served and waiting. */
export function gateConnections(
  server: Server,
  limit: number = CONNECTIONS_SERVED_AT_ONCE,
): () => { served: number; waiting: number } {
  if (!Number.isInteger(limit) || limit < 1)
    throw new RangeError(`a connection gate needs a limit of 1 or more, not ${limit}`);
  let served = 0;
  /** Paused connections in arrival order; a set so a closed one leaves its place at once. */
  const waiting = new Set<Socket>();
  const admit = (socket: Socket): void => {
    served++;
    socket.once('close', () => {
      served--;
      const next = waiting.values().next();
      if (next.done !== true) {
        waiting.delete(next.value);
        admit(next.value);
      }
    });
    socket.resume();
  };
  // Every connection starts paused, nothing read from it (net.Server's pauseOnConnect): an
  // admitted one is resumed, the others wait as they are. Pausing in a 'connection' listener is too
  // late: the HTTP server's parser reads the handle itself.
  (server as Server & { pauseOnConnect: boolean }).pauseOnConnect = true;
  server.on('connection', (socket: Socket) => {
    if (served < limit) return admit(socket);
    waiting.add(socket);
    socket.once('close', () => waiting.delete(socket));
  });
  return () => ({ served, waiting: waiting.size });
}
