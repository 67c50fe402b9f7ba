/**
 * The plugin registry (docs/runtime-adapters.md): wires the
 * socket watcher (sources/plugins/socket-watcher.ts) into the desired state, and the reconciler
 * between desired and actual state, with the handshake client and one handler per plugin type.
 * The parts live beside this file: desired-state.ts, actual-state.ts, reconciler.ts (and the
 * operations it runs, operation-executor.ts), handler.ts.
 *
 * Guarantees:
 * - The desired state changes only on the watcher's reports: a socket (new, or replaced in place,
 *   which the watcher reports even when the new file has the old inode number) is added; `gone`
 *   removes it. A `gone` for a path that was never reported as a socket changes nothing
 *   (kubernetes #96827), and a rename is a `gone` and a `socket`.
 * - Each change pokes the reconciler for that socket alone (see reconciler.ts for its rules).
 * - Nothing registers while the plugins directory is not held to the journal directory's rule, and
 *   no socket of another user is dialed (trust.ts); status says why (`problem`, each entry's error).
 * - A watcher that fails before the signal aborts is logged and told to `onFailure`, never left
 *   unsaid while plugins come and go unseen.
 * - `stopped()`, once the signal given to `start` has aborted, returns after every registered
 *   plugin has been unregistered; nothing registers after it.
 */
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import { type BackoffPolicy, ExponentialBackoff } from '../../core/backoff.ts';
import { type Clock, systemClock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { PluginsStatus } from '../../api/status.ts';
import { RegistrationClient, type RegistrationClientLike } from '../../sources/plugins/registration-client.ts';
import { PluginSocketWatcher, type SocketEvent } from '../../sources/plugins/socket-watcher.ts';
import { ActualState } from './actual-state.ts';
import { DesiredState } from './desired-state.ts';
import type { PluginHandler } from './handler.ts';
import { PluginReconciler } from './reconciler.ts';
import { OWNER_TRUST, type RegistryTrust } from './trust.ts';

/** The watcher's reports, or how to start them: called once, by `start`, with its signal. */
export type SocketEventSource = AsyncIterable<SocketEvent> | ((signal: AbortSignal) => AsyncIterable<SocketEvent>);

export interface PluginRegistryOptions {
  /** The plugins directory (made absolute). */
  readonly dir: string;
  /** One per plugin type; two for one type is a configuration error. */
  readonly handlers: readonly PluginHandler[];
  readonly logger: Logger;
  /** Default: the system clock. */
  readonly clock?: Clock;
  /** Default: a PluginSocketWatcher on `dir`. */
  readonly events?: SocketEventSource;
  /** Rescan period of the default watcher, ms (the watcher's default when unset). */
  readonly rescanMs?: number;
  /** Default: a RegistrationClient with the timeouts below, on `clock`. */
  readonly connect?: (socket: string) => RegistrationClientLike;
  /** Default 1000 (dial and GetInfo). */
  readonly infoTimeoutMs?: number;
  /** Default 5000. */
  readonly notifyTimeoutMs?: number;
  /** After a failed attempt on a socket. Default: 500 ms doubling to 2 min. */
  readonly backoff?: BackoffPolicy;
  /** Whom to trust. Default OWNER_TRUST: the agent's user's (or root's) directory and sockets only. */
  readonly trust?: RegistryTrust;
  /** Told when the socket watcher fails before the signal aborts (no further plugin would be seen). */
  readonly onFailure?: (error: Error) => void;
}

export const DEFAULT_REGISTRY_BACKOFF = { initialMs: 500, maxMs: 120_000 } as const;

export class PluginRegistry {
  readonly #dir: string;
  readonly #o: PluginRegistryOptions;
  readonly #desired: DesiredState;
  readonly #actual = new ActualState();
  readonly #reconciler: PluginReconciler;
  readonly #trust: RegistryTrust;
  /** Until the watcher's `listed`: sockets present at start may still be unreported. */
  #watcher: PluginsStatus['watcher'] = 'listing';
  /** The event loop, ended by the source ending or the signal aborting. */
  #loop: Promise<void> | undefined;

  constructor(options: PluginRegistryOptions) {
    this.#o = options;
    this.#dir = resolve(options.dir);
    const clock = options.clock ?? systemClock;
    const handlers = new Map<string, PluginHandler>();
    for (const handler of options.handlers) {
      if (handlers.has(handler.type))
        throw new WarrenError('INVALID_CONFIG', `two plugin handlers for the type ${JSON.stringify(handler.type)}`);
      if (handler.versions.length === 0)
        throw new WarrenError(
          'INVALID_CONFIG',
          `the plugin handler for ${JSON.stringify(handler.type)} speaks no version`,
        );
      handlers.set(handler.type, handler);
    }
    this.#desired = new DesiredState(clock);
    this.#trust = options.trust ?? OWNER_TRUST;
    const connect =
      options.connect ??
      ((socket: string) =>
        new RegistrationClient(socket, {
          clock,
          infoTimeoutMs: options.infoTimeoutMs,
          notifyTimeoutMs: options.notifyTimeoutMs,
        }));
    this.#reconciler = new PluginReconciler({
      dir: this.#dir,
      handlers,
      desired: this.#desired,
      actual: this.#actual,
      connect,
      clock,
      backoff: options.backoff ?? new ExponentialBackoff(DEFAULT_REGISTRY_BACKOFF),
      logger: options.logger,
      infoTimeoutMs: options.infoTimeoutMs,
      notifyTimeoutMs: options.notifyTimeoutMs,
      trust: this.#trust,
    });
  }

  /** Follows the watcher until the signal aborts. Once only. */
  start(signal: AbortSignal): void {
    if (this.#loop !== undefined) throw new Error('the plugin registry is started already');
    const source =
      this.#o.events ??
      ((s: AbortSignal) =>
        new PluginSocketWatcher({ dir: this.#dir, signal: s, clock: this.#o.clock, rescanMs: this.#o.rescanMs }));
    const events = typeof source === 'function' ? source(signal) : source;
    const aborted = new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', () => resolve(), { once: true });
    });
    // A source that does not end on the signal (a test's channel) must not hold up stopping.
    this.#loop = Promise.race([this.#follow(events, signal), aborted]);
    this.#o.logger.info({ dir: this.#dir }, 'plugin registry watching');
    const problem = this.#trust.dir(this.#dir);
    if (problem !== undefined)
      this.#o.logger.error(
        { dir: this.#dir, problem },
        'the plugins directory is not trusted: no plugin registers until it is put right',
      );
  }

  /** After the signal aborted: unregisters every plugin, then resolves. */
  async stopped(): Promise<void> {
    await this.#loop;
    await this.#reconciler.shutdown();
  }

  /** Resolves once the reconciler has nothing queued or running (tests wait on it). */
  idle(): Promise<void> {
    return this.#reconciler.idle();
  }

  status(): PluginsStatus {
    const plugins = this.#reconciler.entries();
    const count = (state: string): number => plugins.filter((p) => p.state === state).length;
    const problem = this.#trust.dir(this.#dir);
    return {
      dir: this.#dir,
      ...defined({ problem }),
      watcher: this.#watcher,
      registered: count('registered'),
      refused: count('refused'),
      retrying: count('retrying'),
      plugins,
    };
  }

  async #follow(events: AsyncIterable<SocketEvent>, signal: AbortSignal): Promise<void> {
    try {
      for await (const event of events) {
        if (signal.aborted) break;
        this.#apply(event);
      }
    } catch (error) {
      if (signal.aborted) return;
      this.#o.logger.error(
        { dir: this.#dir, err: messageOf(error) },
        'the plugin socket watcher failed; no further plugins will be seen',
      );
      this.#o.onFailure?.(
        new WarrenError('IO_FAILURE', `the plugin socket watcher on ${this.#dir} failed: ${messageOf(error)}`, {
          cause: error,
        }),
      );
    }
  }

  #apply(event: SocketEvent): void {
    const log = this.#o.logger;
    switch (event.kind) {
      case 'socket': {
        const change = this.#desired.add(event.path, event.ino);
        log.debug({ socket: event.path, ino: event.ino, change }, 'plugin socket seen');
        this.#reconciler.poke(event.path);
        return;
      }
      case 'gone':
        if (this.#desired.remove(event.path)) {
          log.debug({ socket: event.path }, 'plugin socket gone');
          this.#reconciler.poke(event.path);
        } else {
          // Not a socket Warren knew: nothing was registered from it, so nothing is undone
          // (kubelet unregisters whatever path was removed: kubernetes #96827).
          log.debug({ path: event.path }, 'a path that was not a plugin socket is gone; nothing to do');
        }
        return;
      case 'listed':
        this.#watcher = 'watching';
        log.info({ dir: this.#dir, sockets: this.#desired.size }, 'plugin sockets present at start listed');
        return;
      case 'error':
        log.warn({ dir: this.#dir, err: messageOf(event.error) }, 'plugin socket watcher error');
        return;
      default: {
        const never: never = event;
        log.warn({ event: never }, 'unknown plugin socket event ignored');
      }
    }
  }
}
