/**
 * A registered `warren.event-source` adapter as a source of releases: an `AsyncIterable` of its
 * container lifecycle events that stops on an `AbortSignal`. It opens the adapter's Watch stream,
 * lists once the adapter has answered it, yields the listing as a `resync` item, then the events,
 * and reopens the stream (and lists again) whenever it ends, fails, stalls or a resync could not be
 * applied, with backoff on the injected clock, forever, until the signal aborts.
 *
 * Guarantees:
 * - Nothing falls between the listing and the stream: List is called only once the adapter has
 *   answered Watch (its response headers or its first message), so the adapter subscribed before
 *   it listed.
 * - After every (re)opened stream the first item is its `resync`; the events that arrived while
 *   List ran come next, in the order they arrived, then every later event as it arrives. An event is
 *   never yielded before the resync of its own stream, and none of a stream that was given up
 *   before its resync came out (the next resync covers them).
 * - The state is `watching` only once the consumer has acknowledged the current stream's resync;
 *   `ack(error)` reopens and lists again, so nothing is ever judged from a listing not applied.
 * - One bad message does not stop a stream: each is decoded here (the gRPC deserializer passes the
 *   bytes through), a malformed one is counted, logged and skipped. Heartbeats only prove the
 *   stream alive: no message of any kind for `stallAfterMs` (on the injected clock) reopens it.
 * - A listing that does not decode is refused as a whole (event-codec.ts) and reopens the stream.
 */
import { Client, type ClientReadableStream, type ClientUnaryCall, Metadata } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { decodeEvent, decodeListing } from '../../api/plugins/event-codec.ts';
import { EMPTY, MESSAGES, METHODS, type RuntimeEvent, type RuntimeListing, encode } from '../../api/plugins/wire.ts';
import type { BackoffPolicy } from '../../core/backoff.ts';
import type { CancelTimer, Clock } from '../../core/clock.ts';
import { AsyncChannel } from '../../core/async-channel.ts';
import { defined } from '../../core/defined.ts';
import { LOCAL_SUBCHANNEL_POOL, closingInsecureCredentials } from '../closing-credentials.ts';
import { messageOf } from '../../core/errors.ts';

export type RuntimeItem =
  | { readonly kind: 'event'; readonly event: RuntimeEvent }
  /**
   * After each (re)opened stream: what List answered. ack() once acted on; ack(error) when it could
   * not be (the client then reopens and lists again).
   */
  | { readonly kind: 'resync'; readonly listing: RuntimeListing; readonly ack: (error?: unknown) => void };

/**
 * `connecting`: a stream is being opened and listed (or its resync awaits the consumer's ack);
 * `watching`: the resync was applied and events flow; `reconnecting`: waiting out a backoff.
 */
export type EventSourceState = 'connecting' | 'watching' | 'reconnecting' | 'stopped';

/** A type alias, not an interface, so it fits the registry's `detail` record as it is. */
export type EventSourceStatus = {
  readonly state: EventSourceState;
  /** When the state last changed (ISO). */
  readonly since: string;
  /** Streams the adapter answered. */
  readonly streams: number;
  readonly events: number;
  readonly heartbeats: number;
  readonly malformed: number;
  readonly lastMalformed?: string;
  readonly lastError?: string;
  readonly lastResync?: { readonly at: string; readonly containers: number };
};

export interface EventSourceClientOptions {
  /** The adapter's EventSource socket: an absolute path (or a `unix:` target). */
  readonly endpoint: string;
  /** The adapter's name, for logs. */
  readonly name: string;
  readonly clock: Clock;
  /** Between failed attempts (a stream that ended, failed, stalled; a refused listing or resync). */
  readonly backoff: BackoffPolicy;
  readonly logger: Logger;
  /** Asked of the adapter. Default 10 000 ms. */
  readonly heartbeatMs?: number | undefined;
  /** A stream silent this long is reopened. Default 3 × heartbeatMs. */
  readonly stallAfterMs?: number;
  /** List must answer within this. Default 5 000 ms. */
  readonly listTimeoutMs?: number;
}

/**
 * One List call on an adapter's endpoint, bounded by `timeoutMs`: its listing, or why there is
 * none (a listing that does not decode is refused as a whole, as the stream's would be). For the
 * registry, to judge what an adapter declares before it is registered.
 */
export function listOnce(endpoint: string, timeoutMs: number): Promise<RuntimeListing | { readonly failed: string }> {
  const target = endpoint.startsWith('unix:') ? endpoint : `unix://${endpoint}`;
  const client = new Client(target, closingInsecureCredentials(), LOCAL_SUBCHANNEL_POOL);
  return new Promise<RuntimeListing | { readonly failed: string }>((resolve) => {
    client.makeUnaryRequest<Buffer, Buffer>(
      METHODS.list,
      (request) => request,
      (bytes: Buffer) => bytes,
      EMPTY,
      new Metadata(),
      { deadline: Date.now() + timeoutMs },
      (error, bytes) => {
        if (error || bytes === undefined) {
          resolve({ failed: `List failed: ${error?.message ?? 'no answer'}` });
          return;
        }
        const listing = decodeListing(bytes);
        resolve(typeof listing === 'string' ? { failed: listing } : listing);
      },
    );
  }).finally(() => client.close());
}

/** What one opened stream is doing. */
interface Attempt {
  readonly generation: number;
  readonly client: Client;
  readonly call: ClientReadableStream<Buffer>;
  list?: ClientUnaryCall;
  /** Cancels the stall timer (reset on every message). */
  stall?: CancelTimer;
  /** Cancels the List timeout. */
  listTimeout?: CancelTimer;
  /** Whether the adapter answered Watch (List is called then, once). */
  answered: boolean;
  /** Events that arrived before the resync went out; undefined once it did. */
  pending: RuntimeEvent[] | undefined;
}

export class EventSourceClient {
  readonly #o: EventSourceClientOptions;
  readonly #heartbeatMs: number;
  readonly #stallAfterMs: number;
  readonly #listTimeoutMs: number;
  readonly #target: string;
  #state: EventSourceState = 'connecting';
  #since: number;
  /** The stream now open, if any; callbacks of older ones are recognised by their generation. */
  #attempt: Attempt | undefined;
  #generation = 0;
  /** The pending reconnect. */
  #retry: CancelTimer | undefined;
  /** Consecutive failures since the last applied resync, for the backoff. */
  #failures = 0;
  #stopped = false;
  #counts = { streams: 0, events: 0, heartbeats: 0, malformed: 0 };
  #lastMalformed: string | undefined;
  #lastError: string | undefined;
  #lastResync: { at: string; containers: number } | undefined;
  /** Where items go, in order, for the one consumer of `events`. */
  #channel: AsyncChannel<RuntimeItem> | undefined;

  constructor(options: EventSourceClientOptions) {
    this.#o = options;
    this.#heartbeatMs = options.heartbeatMs ?? 10_000;
    this.#stallAfterMs = options.stallAfterMs ?? 3 * this.#heartbeatMs;
    this.#listTimeoutMs = options.listTimeoutMs ?? 5_000;
    this.#target = options.endpoint.startsWith('unix:') ? options.endpoint : `unix://${options.endpoint}`;
    this.#since = options.clock.now();
  }

  get state(): EventSourceState {
    return this.#state;
  }

  /** Resyncs and events until `signal` aborts (or the consumer stops iterating). Iterated once. */
  async *events(signal: AbortSignal): AsyncGenerator<RuntimeItem> {
    if (this.#channel !== undefined) throw new Error('an EventSourceClient is iterated once');
    const channel = new AsyncChannel<RuntimeItem>();
    this.#channel = channel;
    const stop = (): void => {
      if (this.#stopped) return;
      this.#stopped = true;
      this.#disconnect();
      this.#setState('stopped');
      channel.close();
    };
    signal.addEventListener('abort', stop, { once: true });
    if (signal.aborted) stop();
    else this.#connect();
    try {
      yield* channel;
    } finally {
      signal.removeEventListener('abort', stop);
      stop();
    }
  }

  status(): EventSourceStatus {
    return {
      state: this.#state,
      since: new Date(this.#since).toISOString(),
      ...this.#counts,
      ...defined({ lastMalformed: this.#lastMalformed, lastError: this.#lastError, lastResync: this.#lastResync }),
    };
  }

  #setState(state: EventSourceState): void {
    if (state === this.#state) return;
    this.#state = state;
    this.#since = this.#o.clock.now();
  }

  #connect(): void {
    if (this.#stopped) return;
    this.#retry = undefined;
    this.#setState('connecting');
    const generation = ++this.#generation;
    // Closing the client closes its connection too, answered or not (closing-credentials.ts).
    const client = new Client(this.#target, closingInsecureCredentials(), LOCAL_SUBCHANNEL_POOL);
    const call = client.makeServerStreamRequest<Record<string, unknown>, Buffer>(
      METHODS.watch,
      (request) => encode(MESSAGES.WatchRequest, request),
      // The bytes as they came: each is decoded in #message, so a bad one is skipped, not fatal.
      (bytes: Buffer) => bytes,
      { heartbeat_interval_ms: this.#heartbeatMs },
      new Metadata(),
    );
    const attempt: Attempt = { generation, client, call, answered: false, pending: [] };
    this.#attempt = attempt;
    this.#armStall(attempt);
    call.on('metadata', () => this.#answered(attempt));
    call.on('data', (bytes: Buffer) => this.#message(attempt, bytes));
    call.on('error', (error: Error) => this.#lost(generation, `Watch failed: ${error.message}`));
    call.on('end', () => this.#lost(generation, 'the adapter ended the Watch stream'));
  }

  #armStall(attempt: Attempt): void {
    attempt.stall?.();
    attempt.stall = this.#o.clock.setTimer(this.#stallAfterMs, () => {
      this.#lost(attempt.generation, `no message for ${this.#stallAfterMs} ms (stalled)`);
    });
  }

  /** The adapter answered Watch, so it is subscribed: list now (once per stream). */
  #answered(attempt: Attempt): void {
    if (attempt.generation !== this.#generation || attempt.answered) return;
    attempt.answered = true;
    this.#counts.streams += 1;
    attempt.listTimeout = this.#o.clock.setTimer(this.#listTimeoutMs, () => {
      this.#lost(attempt.generation, `List did not answer within ${this.#listTimeoutMs} ms`);
    });
    attempt.list = attempt.client.makeUnaryRequest<Buffer, Buffer>(
      METHODS.list,
      (request) => request,
      (bytes: Buffer) => bytes,
      EMPTY,
      new Metadata(),
      (error, bytes) => {
        if (attempt.generation !== this.#generation) return;
        attempt.listTimeout?.();
        if (error || bytes === undefined) {
          this.#lost(attempt.generation, `List failed: ${error?.message ?? 'no answer'}`);
          return;
        }
        const listing = decodeListing(bytes);
        if (typeof listing === 'string') {
          this.#lost(attempt.generation, listing);
          return;
        }
        this.#resync(attempt, listing);
      },
    );
  }

  #resync(attempt: Attempt, listing: RuntimeListing): void {
    const pending = attempt.pending ?? [];
    attempt.pending = undefined;
    let acked = false;
    const ack = (error?: unknown): void => {
      if (acked) return;
      acked = true;
      this.#resynced(attempt.generation, listing.ids.length, error);
    };
    this.#channel?.push({ kind: 'resync', listing, ack });
    for (const event of pending) this.#channel?.push({ kind: 'event', event });
  }

  /** The consumer acted on the resync of stream `generation` (or could not: `error`). */
  #resynced(generation: number, containers: number, error: unknown): void {
    if (generation !== this.#generation || this.#stopped) return;
    if (error !== undefined) {
      this.#lost(generation, `the resync could not be applied: ${messageOf(error)}`);
      return;
    }
    this.#failures = 0;
    this.#lastResync = { at: new Date(this.#o.clock.now()).toISOString(), containers };
    this.#setState('watching');
    this.#o.logger.info(
      { adapter: this.#o.name, endpoint: this.#o.endpoint, containers },
      'watching runtime adapter; resynchronised',
    );
  }

  #message(attempt: Attempt, bytes: Buffer): void {
    if (attempt.generation !== this.#generation) return;
    this.#armStall(attempt);
    // A message is an answer too, for adapters that send no headers before their first one.
    this.#answered(attempt);
    const decoded = decodeEvent(bytes);
    switch (decoded.kind) {
      case 'heartbeat':
        this.#counts.heartbeats += 1;
        return;
      case 'event':
        this.#counts.events += 1;
        if (attempt.pending !== undefined) attempt.pending.push(decoded.event);
        else this.#channel?.push({ kind: 'event', event: decoded.event });
        return;
      case 'malformed':
        this.#counts.malformed += 1;
        this.#lastMalformed = decoded.reason;
        this.#o.logger.warn(
          { adapter: this.#o.name, reason: decoded.reason },
          'malformed runtime adapter event skipped',
        );
        return;
      default: {
        const never: never = decoded;
        throw new Error(`unhandled decode ${JSON.stringify(never)}`);
      }
    }
  }

  /** Stream `generation` is over (failed, ended, stalled, refused): reopen after a backoff. */
  #lost(generation: number, reason: string): void {
    if (generation !== this.#generation || this.#stopped) return;
    this.#lastError = reason;
    this.#disconnect();
    this.#failures += 1;
    const wait = this.#o.backoff.delay(this.#failures);
    this.#setState('reconnecting');
    this.#o.logger.warn(
      { adapter: this.#o.name, endpoint: this.#o.endpoint, reason, retryInMs: wait },
      'lost runtime adapter stream; reopening',
    );
    this.#retry = this.#o.clock.setTimer(wait, () => this.#connect());
  }

  /** Ends the current stream, if any; its late callbacks are ignored (the generation moves on). */
  #disconnect(): void {
    this.#generation += 1;
    this.#retry?.();
    this.#retry = undefined;
    const attempt = this.#attempt;
    this.#attempt = undefined;
    if (attempt === undefined) return;
    attempt.stall?.();
    attempt.listTimeout?.();
    attempt.list?.cancel();
    attempt.call.cancel();
    attempt.client.close();
  }
}
