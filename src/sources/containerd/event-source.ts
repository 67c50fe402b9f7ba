/**
 * containerd as a source of releases: an `AsyncIterable` of container events that stops on an
 * `AbortSignal`. It follows containerd's socket with the list-then-watch directory watcher,
 * subscribes to container and task events in the configured namespaces whenever the socket is
 * there, and after every (re)subscription lists the containers that exist and yields that live
 * set as a `resync` item, so the consumer can resynchronise with what happened while nobody was
 * listening.
 *
 * Guarantees: items come out in the order they happened (an event decoded before a resync's
 * listing finished comes out before the resync); the state is `subscribed` only once the consumer
 * has acknowledged the resync of the current subscription; a resync the consumer could not apply
 * makes the source reconnect and list again, so nothing is ever judged from a listing that was
 * not applied. The source decides nothing: events that are not for Warren are skipped quietly,
 * malformed ones logged and skipped; the stream goes on either way.
 */
import { basename, dirname } from 'node:path';
import type { Logger } from 'pino';
import type { BackoffPolicy } from '../../core/backoff.ts';
import type { CancelTimer, Clock } from '../../core/clock.ts';
import { AsyncChannel } from '../../core/async-channel.ts';
import { defined } from '../../core/defined.ts';
import { DirectoryWatcher } from '../../core/dir-watcher.ts';
import { messageOf } from '../../core/errors.ts';
import {
  type ContainerEvent,
  ContainerdClient,
  type RawEnvelope,
  type Subscription,
  decodeEvent,
  subscribeFilters,
} from './client.ts';
import type { ContainerdState, ContainerdStatus } from '../../api/status.ts';
import { type PodSandbox, podSandboxes } from './pod-sandboxes.ts';

export type ContainerdItem =
  | { readonly kind: 'event'; readonly event: ContainerEvent }
  /**
   * After each (re)subscription: the IDs of every container in the namespaces, now. The consumer
   * calls `ack()` once it has acted on it, or `ack(error)` when it could not (the source then
   * reconnects and lists again).
   */
  | { readonly kind: 'resync'; readonly live: ReadonlySet<string>; readonly ack: (error?: unknown) => void };

/** The source's own part of the status the API reports (the pipeline adds what was released). */
export type ContainerdSourceStatus = Omit<ContainerdStatus, 'releases'>;

export interface ContainerdSourceOptions {
  readonly socket: string;
  readonly namespaces: readonly string[];
  readonly clock: Clock;
  /** Between failed connection attempts while the socket exists. */
  readonly backoff: BackoffPolicy;
  readonly logger: Logger;
  /** How often the socket's directory is re-listed in case a watch event was lost. Default 1 s. */
  readonly rescanMs?: number;
}

export class ContainerdEventSource {
  readonly #o: ContainerdSourceOptions;
  #state: ContainerdState = 'waiting-for-socket';
  #since: number;
  #client: ContainerdClient | undefined;
  #subscription: Subscription | undefined;
  #retry: CancelTimer | undefined;
  #failures = 0;
  #socketPresent = false;
  #stopped = false;
  #generation = 0;
  #counts = { subscriptions: 0, events: 0, skipped: 0, malformed: 0 };
  #lastError: string | undefined;
  #lastResync: { at: string; containers: number } | undefined;
  /** Resolves the next time the state becomes `subscribed` (for callers that wait on it). */
  #subscribedWaiters = new Set<() => void>();
  /** Where decoded events and resyncs go, in order, for the one consumer of `events`. */
  #channel: AsyncChannel<ContainerdItem> | undefined;

  constructor(options: ContainerdSourceOptions) {
    this.#o = options;
    this.#since = options.clock.now();
  }

  get state(): ContainerdState {
    return this.#state;
  }

  /** Container events and resyncs until `signal` aborts (or the consumer stops iterating). */
  async *events(signal: AbortSignal): AsyncGenerator<ContainerdItem> {
    if (this.#channel !== undefined) throw new Error('a ContainerdEventSource is iterated once');
    const channel = new AsyncChannel<ContainerdItem>();
    this.#channel = channel;
    // Ends the following when the caller aborts or stops iterating early.
    const stop = new AbortController();
    const onAbort = (): void => stop.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) stop.abort();
    const following = this.#follow(stop.signal).finally(() => channel.close());
    try {
      yield* channel;
    } finally {
      stop.abort();
      signal.removeEventListener('abort', onAbort);
      await following;
    }
  }

  /** Follows the socket until `signal` aborts. */
  async #follow(signal: AbortSignal): Promise<void> {
    const name = basename(this.#o.socket);
    const watcher = new DirectoryWatcher({
      dir: dirname(this.#o.socket),
      signal,
      clock: this.#o.clock,
      rescanMs: this.#o.rescanMs ?? 1_000,
      include: (n) => n === name,
    });
    let reportedMissingDir = false;
    try {
      for await (const event of watcher) {
        switch (event.kind) {
          case 'present':
          case 'added':
            reportedMissingDir = false;
            this.#socketPresent = true;
            this.#connect();
            break;
          case 'changed':
            // A new socket file: containerd restarted. Whatever stream there was is dead.
            this.#socketPresent = true;
            this.#disconnect();
            this.#connect();
            break;
          case 'removed':
            this.#socketPresent = false;
            this.#disconnect();
            this.#setState('waiting-for-socket');
            this.#o.logger.warn({ socket: this.#o.socket }, 'containerd socket gone; waiting for it to come back');
            break;
          case 'listed':
            if (!this.#socketPresent && !reportedMissingDir)
              this.#o.logger.info({ socket: this.#o.socket }, 'waiting for containerd');
            break;
          case 'error':
            // Typically the socket's directory does not exist yet: keep waiting, say so once.
            if (!reportedMissingDir)
              this.#o.logger.info({ socket: this.#o.socket, reason: event.error.message }, 'waiting for containerd');
            reportedMissingDir = true;
            break;
          default: {
            const never: never = event;
            throw new Error(`unhandled watcher event ${JSON.stringify(never)}`);
          }
        }
      }
    } finally {
      this.#stopped = true;
      this.#disconnect();
      this.#setState('stopped');
      for (const wake of this.#subscribedWaiters) wake();
    }
  }

  /** Resolves once subscribed (at once if already). */
  subscribed(): Promise<void> {
    if (this.#state === 'subscribed') return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        this.#subscribedWaiters.delete(wake);
        resolve();
      };
      this.#subscribedWaiters.add(wake);
    });
  }

  #setState(state: ContainerdState): void {
    if (state === this.#state) return;
    this.#state = state;
    this.#since = this.#o.clock.now();
    if (state === 'subscribed') for (const wake of [...this.#subscribedWaiters]) wake();
  }

  #connect(): void {
    if (this.#stopped || this.#state === 'connecting' || this.#state === 'subscribed') return;
    this.#retry?.();
    this.#retry = undefined;
    this.#setState('connecting');
    const generation = ++this.#generation;
    const client = new ContainerdClient(this.#o.socket);
    this.#client = client;
    const subscription = client.subscribe(
      subscribeFilters(this.#o.namespaces),
      (envelope) => this.#envelope(envelope),
      (error) => {
        if (generation === this.#generation) this.#lost(error?.message ?? 'event stream ended');
      },
    );
    this.#subscription = subscription;
    void (async () => {
      await subscription.ready;
      const live = new Set<string>();
      for (const ns of this.#o.namespaces) for (const id of await client.listContainers(ns)) live.add(id);
      if (generation !== this.#generation) return;
      this.#channel?.push({
        kind: 'resync',
        live,
        ack: (error?: unknown) => this.#resynced(generation, live.size, error),
      });
    })().catch((error: unknown) => {
      if (generation === this.#generation) this.#lost(messageOf(error));
    });
  }

  /** The consumer acted on the resync of subscription `generation` (or could not: `error`). */
  #resynced(generation: number, containers: number, error: unknown): void {
    if (generation !== this.#generation) return;
    if (error !== undefined) {
      this.#lost(messageOf(error));
      return;
    }
    this.#counts.subscriptions += 1;
    this.#failures = 0;
    this.#lastResync = { at: new Date(this.#o.clock.now()).toISOString(), containers };
    this.#setState('subscribed');
    this.#o.logger.info(
      { socket: this.#o.socket, namespaces: this.#o.namespaces, containers },
      'subscribed to containerd events; resynchronised',
    );
  }

  /** The connection failed or ended: try again after a backoff while the socket is there. */
  #lost(reason: string): void {
    this.#lastError = reason;
    this.#disconnect();
    if (this.#stopped) return;
    if (!this.#socketPresent) {
      this.#setState('waiting-for-socket');
      return;
    }
    this.#failures += 1;
    const wait = this.#o.backoff.delay(this.#failures);
    this.#setState('reconnecting');
    this.#o.logger.warn({ socket: this.#o.socket, reason, retryInMs: wait }, 'lost containerd; reconnecting');
    this.#retry = this.#o.clock.setTimer(wait, () => {
      this.#retry = undefined;
      this.#connect();
    });
  }

  #disconnect(): void {
    this.#generation += 1;
    this.#retry?.();
    this.#retry = undefined;
    const subscription = this.#subscription;
    const client = this.#client;
    this.#subscription = undefined;
    this.#client = undefined;
    subscription?.cancel();
    client?.close();
    if (this.#state === 'subscribed' || this.#state === 'connecting')
      this.#setState(this.#socketPresent ? 'reconnecting' : 'waiting-for-socket');
  }

  #envelope(envelope: RawEnvelope): void {
    const decoded = decodeEvent(envelope);
    switch (decoded.kind) {
      case 'event':
        this.#counts.events += 1;
        this.#channel?.push({ kind: 'event', event: decoded.event });
        return;
      case 'ignored':
        this.#counts.skipped += 1;
        this.#o.logger.debug({ reason: decoded.reason }, 'containerd event skipped');
        return;
      case 'malformed':
        this.#counts.malformed += 1;
        this.#o.logger.warn({ reason: decoded.reason }, 'malformed containerd event skipped');
        return;
      default: {
        const never: never = decoded;
        throw new Error(`unhandled decode ${JSON.stringify(never)}`);
      }
    }
  }

  /** The pod sandboxes in the namespaces followed (pod-sandboxes.ts); none while not subscribed. */
  async podSandboxes(): Promise<PodSandbox[]> {
    const client = this.#client;
    if (client === undefined || this.#state !== 'subscribed') return [];
    const found: PodSandbox[] = [];
    for (const ns of this.#o.namespaces) found.push(...(await podSandboxes(client, ns)));
    return found;
  }

  status(): ContainerdSourceStatus {
    return {
      socket: this.#o.socket,
      namespaces: this.#o.namespaces,
      state: this.#state,
      since: new Date(this.#since).toISOString(),
      ...this.#counts,
      ...defined({ lastError: this.#lastError, lastResync: this.#lastResync }),
    };
  }
}
