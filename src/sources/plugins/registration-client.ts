/**
 * The caller's side of kubelet's registration handshake (registration.proto): dial a plugin's
 * registration socket, ask `GetInfo`, tell it `NotifyRegistrationStatus`. One client per attempt;
 * the registry closes it when the attempt ends.
 *
 * Guarantees:
 * - Every call ends within its bound on the injected clock (dial + GetInfo 1 s, notify 5 s by
 *   default): a plugin that accepts the connection and never answers is cancelled and reported
 *   as a timeout, not waited for. gRPC's own deadlines read the system clock and are not used.
 * - Nothing a plugin sends can throw past this module: an answer that does not decode comes back
 *   as a rejected call saying what was wrong, like any other failed call.
 * - Failures are WarrenErrors: `TRY_AGAIN` for a timeout, `IO_FAILURE` for everything else (no
 *   socket, refused connection, an RPC error, an undecodable answer).
 */
import { Client, Metadata, type ServiceError } from '@grpc/grpc-js';
import { type CancelTimer, type Clock, systemClock } from '../../core/clock.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { LOCAL_SUBCHANNEL_POOL, closingInsecureCredentials } from '../closing-credentials.ts';
import {
  EMPTY,
  METHODS,
  type PluginInfo,
  type RegistrationStatus,
  decodeInfo,
  encodeStatus,
} from '../../api/plugins/wire.ts';

/** What the registry needs of a handshake: the real client below, or a fake in tests. */
export interface RegistrationClientLike {
  /** The plugin's PluginInfo as it sent it (meaning is checked by the registry). */
  getInfo(): Promise<PluginInfo>;
  notify(status: RegistrationStatus): Promise<void>;
  /** Drops the connection; calls still running are cancelled. Idempotent. */
  close(): void;
}

export interface RegistrationClientOptions {
  readonly clock?: Clock;
  /** Bound on dialling and GetInfo together, ms. Default 1000. */
  readonly infoTimeoutMs?: number | undefined;
  /** Bound on NotifyRegistrationStatus, ms. Default 5000. */
  readonly notifyTimeoutMs?: number | undefined;
}

export const DEFAULT_INFO_TIMEOUT_MS = 1_000;
export const DEFAULT_NOTIFY_TIMEOUT_MS = 5_000;

/** A PluginInfo is a few short strings; anything near this is not one. */
const MAX_ANSWER_BYTES = 64 * 1024;

type Decoded<T> = { readonly ok: T } | { readonly wrong: string };

export class RegistrationClient implements RegistrationClientLike {
  readonly socket: string;
  readonly #client: Client;
  readonly #clock: Clock;
  readonly #infoTimeoutMs: number;
  readonly #notifyTimeoutMs: number;
  /** Calls in flight, so close() can cancel them rather than leave them to finish on their own. */
  readonly #calls = new Set<() => void>();
  #closed = false;

  constructor(socket: string, options: RegistrationClientOptions = {}) {
    this.socket = socket;
    this.#clock = options.clock ?? systemClock;
    this.#infoTimeoutMs = options.infoTimeoutMs ?? DEFAULT_INFO_TIMEOUT_MS;
    this.#notifyTimeoutMs = options.notifyTimeoutMs ?? DEFAULT_NOTIFY_TIMEOUT_MS;
    // Closing the client closes its connection too, answered or not (closing-credentials.ts).
    this.#client = new Client(`unix://${socket}`, closingInsecureCredentials(), {
      ...LOCAL_SUBCHANNEL_POOL,
      'grpc.max_receive_message_length': MAX_ANSWER_BYTES,
      // One attempt per client: the registry owns retries and their backoff.
      'grpc.enable_retries': 0,
    });
  }

  async getInfo(): Promise<PluginInfo> {
    return this.#call<PluginInfo>(
      'GetInfo',
      METHODS.getInfo,
      EMPTY,
      (bytes) => {
        const info = decodeInfo(bytes);
        return typeof info === 'string' ? { wrong: info } : { ok: info };
      },
      this.#infoTimeoutMs,
    );
  }

  async notify(status: RegistrationStatus): Promise<void> {
    await this.#call<undefined>(
      'NotifyRegistrationStatus',
      METHODS.notifyRegistrationStatus,
      encodeStatus(status),
      () => ({ ok: undefined }),
      this.#notifyTimeoutMs,
    );
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const cancel of [...this.#calls]) cancel();
    this.#client.close();
  }

  #call<T>(
    name: string,
    method: string,
    request: Buffer,
    decode: (bytes: Buffer) => Decoded<T>,
    timeoutMs: number,
  ): Promise<T> {
    const where = `${name} on ${this.socket}`;
    if (this.#closed) return Promise.reject(new WarrenError('IO_FAILURE', `${where}: the client is closed`));
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      // Set below; a callback cannot run before (gRPC answers later, the timer fires later).
      let cancelTimer: CancelTimer = () => undefined;
      const settle = (finish: () => void): void => {
        if (settled) return;
        settled = true;
        cancelTimer();
        this.#calls.delete(abandon);
        finish();
      };
      const call = this.#client.makeUnaryRequest(
        method,
        (bytes: Buffer) => bytes,
        // Decoding never throws: a wrong answer is a value, turned into a rejection below.
        (bytes: Buffer): Decoded<T> => {
          try {
            return decode(bytes);
          } catch (error) {
            return { wrong: messageOf(error) };
          }
        },
        request,
        new Metadata(),
        {},
        (error: ServiceError | null, answer?: Decoded<T>) =>
          settle(() => {
            if (error)
              reject(new WarrenError('IO_FAILURE', `${where}: ${error.details || error.message}`, { cause: error }));
            else if (answer === undefined) reject(new WarrenError('IO_FAILURE', `${where}: no answer`));
            else if ('wrong' in answer) reject(new WarrenError('IO_FAILURE', `${where}: ${answer.wrong}`));
            else resolve(answer.ok);
          }),
      );
      const abandon = (): void =>
        settle(() => {
          call.cancel();
          reject(new WarrenError('IO_FAILURE', `${where}: cancelled (the client was closed)`));
        });
      this.#calls.add(abandon);
      cancelTimer = this.#clock.setTimer(timeoutMs, () =>
        settle(() => {
          call.cancel();
          reject(new WarrenError('TRY_AGAIN', `${where}: no answer within ${timeoutMs} ms`));
        }),
      );
    });
  }
}
