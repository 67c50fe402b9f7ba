/**
 * The registry's handshake calls to plugin sockets, bounded and stoppable: the reconciler's way to
 * dial a socket, ask GetInfo and send NotifyRegistrationStatus, whatever client (real or fake) it
 * was given. The client (sources/plugins/registration-client.ts) bounds its own calls too; these
 * bounds hold even for one that does not.
 *
 * Guarantees:
 * - Every call ends within its bound on the injected clock (dial + GetInfo 1 s, notify 5 s by
 *   default): one with no answer by then closes its client and is rejected (TRY_AGAIN).
 * - `stop` closes every client in use and ends every call being waited for (TRY_AGAIN, "Warren is
 *   stopping"), so no attempt holds a shutdown up, whatever the client does.
 * - A timer or a wait outlives no call: each is removed as the call ends, whichever way it ends.
 */
import type { Clock } from '../../core/clock.ts';
import { WarrenError } from '../../core/errors.ts';
import type { PluginInfo, RegistrationStatus } from '../../api/plugins/wire.ts';
import {
  DEFAULT_INFO_TIMEOUT_MS,
  DEFAULT_NOTIFY_TIMEOUT_MS,
  type RegistrationClientLike,
} from '../../sources/plugins/registration-client.ts';

export interface HandshakeOptions {
  /** A new handshake client for one attempt on a socket. */
  readonly connect: (socket: string) => RegistrationClientLike;
  readonly clock: Clock;
  /** Bound on dial + GetInfo, ms, whatever the client does. Default 1000. */
  readonly infoTimeoutMs?: number | undefined;
  /** Bound on NotifyRegistrationStatus, ms. Default 5000. */
  readonly notifyTimeoutMs?: number | undefined;
}

/** One attempt's client, its calls bounded; `close` it when the attempt ends. */
export type Handshake = RegistrationClientLike;

export class Handshakes {
  readonly #o: HandshakeOptions;
  /** Handshake clients in use, closed at `stop` so no attempt holds it up. */
  readonly #clients = new Set<RegistrationClientLike>();
  /** Handshake calls being waited for: `stop` ends the waits, whatever the client does. */
  readonly #waits = new Set<() => void>();

  constructor(options: HandshakeOptions) {
    this.#o = options;
  }

  /** Dials `socket` for one attempt (throws when it cannot); in use until closed. */
  open(socket: string): Handshake {
    const client = this.#o.connect(socket);
    this.#clients.add(client);
    return {
      getInfo: (): Promise<PluginInfo> =>
        this.#bounded('GetInfo', this.#o.infoTimeoutMs ?? DEFAULT_INFO_TIMEOUT_MS, client, client.getInfo()),
      notify: (status: RegistrationStatus): Promise<void> =>
        this.#bounded(
          'NotifyRegistrationStatus',
          this.#o.notifyTimeoutMs ?? DEFAULT_NOTIFY_TIMEOUT_MS,
          client,
          client.notify(status),
        ),
      close: (): void => {
        this.#clients.delete(client);
        client.close();
      },
    };
  }

  /** Closes every client in use and ends every call being waited for; see the module header. */
  stop(): void {
    for (const client of this.#clients) client.close();
    for (const stop of [...this.#waits]) stop();
  }

  /** The call's outcome, or a timeout after `ms` on the clock (which closes the client). */
  #bounded<T>(what: string, ms: number, client: RegistrationClientLike, call: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let ended = false;
      const end = (finish: () => void): void => {
        if (ended) return;
        ended = true;
        cancel();
        this.#waits.delete(stop);
        finish();
      };
      const stop = (): void => end(() => reject(new WarrenError('TRY_AGAIN', `${what}: Warren is stopping`)));
      const cancel = this.#o.clock.setTimer(ms, () =>
        end(() => {
          client.close();
          reject(new WarrenError('TRY_AGAIN', `${what}: no answer within ${ms} ms`));
        }),
      );
      this.#waits.add(stop);
      call.then(
        (value) => end(() => resolve(value)),
        (error: unknown) => end(() => reject(error)),
      );
    });
  }
}
