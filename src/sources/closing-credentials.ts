/**
 * Insecure gRPC channel credentials (plain unix sockets) whose connections end with their channel.
 *
 * Why: grpc-js (1.14) leaves a connection open for good when its channel is closed before the
 * peer finished the HTTP/2 handshake: the subchannel goes idle, but the half-made session waits
 * for the peer's SETTINGS forever, holding its socket. A plugin that accepts and never answers
 * then cost a descriptor (and its buffers) per attempt, every retry (issue 24, item 18); so would a
 * wedged containerd on every reconnect. Used by every gRPC client of the sources.
 *
 * Guarantee: when grpc-js lets go of a subchannel (its channel closed, with a local subchannel
 * pool: `LOCAL_SUBCHANNEL_POOL`), it destroys the subchannel's connector, and this connector then
 * destroys every socket it handed out — finished handshake or not. A Client built with these
 * credentials and options holds no descriptor once `close()` has run and the event loop turned.
 */
import type { Socket } from 'node:net';
import { type CallCredentials, ChannelCredentials, type ChannelOptions } from '@grpc/grpc-js';

/** Channel options that give each channel its own subchannels, released when it closes. */
export const LOCAL_SUBCHANNEL_POOL: ChannelOptions = { 'grpc.use_local_subchannel_pool': 1 };

/** The connector grpc-js asks of credentials (its `SecureConnector`, not exported by name). */
type Connector = ReturnType<ChannelCredentials['_createSecureConnector']>;

class ClosingInsecureCredentials extends ChannelCredentials {
  readonly #insecure = ChannelCredentials.createInsecure();

  override compose(): ChannelCredentials {
    throw new Error('insecure credentials cannot carry call credentials');
  }

  _isSecure(): boolean {
    return false;
  }

  _equals(other: ChannelCredentials): boolean {
    return other === this;
  }

  _createSecureConnector(...args: Parameters<ChannelCredentials['_createSecureConnector']>): Connector {
    const inner = this.#insecure._createSecureConnector(...args);
    const sockets = new Set<Socket>();
    let destroyed = false;
    return {
      connect: (socket: Socket) => {
        if (destroyed) {
          socket.destroy();
          return Promise.reject(new Error('the channel was closed'));
        }
        sockets.add(socket);
        socket.once('close', () => sockets.delete(socket));
        return inner.connect(socket);
      },
      waitForReady: () => inner.waitForReady(),
      getCallCredentials: (): CallCredentials => inner.getCallCredentials(),
      destroy: () => {
        destroyed = true;
        for (const socket of sockets) socket.destroy();
        sockets.clear();
        inner.destroy();
      },
    };
  }
}

/** Fresh credentials per client: a subchannel is never shared with another client's. */
export function closingInsecureCredentials(): ChannelCredentials {
  return new ClosingInsecureCredentials();
}
