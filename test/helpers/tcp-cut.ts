/**
 * A TCP relay on loopback in front of a real server (an etcd member), which a test can cut and
 * restore: `cut` ends every relayed connection and stops listening (new connections are refused),
 * `restore` listens again on the same port. What a network cut between one agent and etcd looks
 * like to that agent, while the test still reaches etcd directly.
 */
import { type Server, type Socket, connect, createServer } from 'node:net';

export interface TcpCut {
  /** `http://127.0.0.1:<port>`: the relay's address, for a client's endpoints. */
  readonly url: string;
  cut(): Promise<void>;
  restore(): Promise<void>;
  stop(): Promise<void>;
}

/** A relay to `target` (`http://host:port`), listening. */
export async function startTcpCut(target: string): Promise<TcpCut> {
  const to = new URL(target);
  const sockets = new Set<Socket>();
  let port = 0;
  let server: Server | undefined;
  const listen = async (): Promise<void> => {
    const made = createServer((inbound) => {
      const outbound = connect(Number(to.port), to.hostname);
      for (const s of [inbound, outbound]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => {
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.pipe(outbound);
      outbound.pipe(inbound);
    });
    await new Promise<void>((resolve, reject) => {
      made.once('error', reject);
      made.listen(port, '127.0.0.1', () => resolve());
    });
    const address = made.address();
    if (typeof address === 'object' && address !== null) port = address.port;
    server = made;
  };
  const close = async (): Promise<void> => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (s !== undefined) await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  await listen();
  return {
    url: `http://127.0.0.1:${port}`,
    cut: close,
    restore: listen,
    stop: close,
  };
}
