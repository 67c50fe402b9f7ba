/**
 * The registry's operations on one socket, run by the reconciler (reconciler.ts) under its lock on
 * that socket: register (trust, dial, GetInfo, check, claim the name, handler.register,
 * NotifyRegistrationStatus) and unregister (handler.unregister, the name let go). kubelet's
 * operation executor; which operation a socket needs, and when, is the reconciler's. Whether a
 * PluginInfo can be used is info-check.ts; the handshake calls themselves, bounded and stoppable,
 * handshake.ts; a socket's record, and its state and wake, socket-record.ts.
 *
 * Guarantees:
 * - Every handshake call is bounded on the injected clock (dial + GetInfo 1 s, notify 5 s), in
 *   handshake.ts as well as in the client, so no client, real or fake, can hold a socket's
 *   operation longer. A failure is counted on the socket's record and retried after its backoff
 *   on that clock (a timer pokes the socket); once stopped, none is.
 * - Nothing is dialed while the plugins directory is not trusted (trust.ts: retried with backoff,
 *   so a directory put right is used again), nor a socket of another user than the agent's or
 *   root's (refused without a word: it is not talked to). An endpoint of such a user is refused.
 * - A refusal (PluginInfo that cannot be used, or its handler's) is told to the plugin with the
 *   reason, and its record waits for the socket to be replaced; a refusal for a name another
 *   socket holds waits for that name to be let go (the host is told of every name let go). A
 *   refusal that could not be told (the notify failed or timed out) is a failure: the socket is
 *   asked again after its backoff and told again, so no plugin waits unanswered.
 * - A (type, name) pair is held by at most one socket, from the moment it passes the checks until
 *   its plugin is unregistered, or its registration fails or is refused.
 * - A handler that throws from unregister is logged; the plugin is unregistered all the same.
 */
import type { Logger } from 'pino';
import type { BackoffPolicy } from '../../core/backoff.ts';
import { messageOf } from '../../core/errors.ts';
import type { PluginState } from '../../api/status.ts';
import type { PluginInfo } from '../../api/plugins/wire.ts';
import type { ActualPlugin, ActualState } from './actual-state.ts';
import type { DesiredState } from './desired-state.ts';
import type { PluginHandler, RegisteredPlugin } from './handler.ts';
import { type Handshake, type HandshakeOptions, Handshakes } from './handshake.ts';
import { checkInfo } from './info-check.ts';
import { type SocketRecord, type Wake, setWake } from './socket-record.ts';
import type { RegistryTrust } from './trust.ts';

const claimKey = (type: string, name: string): string => `${type}\0${name}`;

/** `connect`, `clock` and the handshake's bounds: handshake.ts (the clock serves for retries too). */
export interface OperationExecutorOptions extends HandshakeOptions {
  /** The plugins directory, absolute. */
  readonly dir: string;
  readonly handlers: ReadonlyMap<string, PluginHandler>;
  readonly desired: DesiredState;
  readonly actual: ActualState;
  readonly backoff: BackoffPolicy;
  readonly logger: Logger;
  /** Whether the directory and a socket may be trusted (trust.ts). */
  readonly trust: RegistryTrust;
}

/** What the executor asks of the reconciler that runs it. */
export interface OperationHost {
  /** Reconciles `socket` soon (a retry whose backoff is over). */
  readonly poke: (socket: string) => void;
  /** A name was let go: every socket waiting for it is to be asked again. */
  readonly released: (claim: string) => void;
}

export class PluginOperationExecutor {
  readonly #o: OperationExecutorOptions;
  readonly #host: OperationHost;
  /** (type, name) → the socket holding it, from passing the checks until unregistered. */
  readonly #claims = new Map<string, string>();
  /** Handshake calls, bounded; stopped at `stop` so no attempt holds a shutdown up. */
  readonly #handshakes: Handshakes;
  #stopped = false;

  constructor(options: OperationExecutorOptions, host: OperationHost) {
    this.#o = options;
    this.#host = host;
    this.#handshakes = new Handshakes(options);
  }

  /** Ends every handshake call in flight; no failure is retried after a backoff from now on. */
  stop(): void {
    this.#stopped = true;
    this.#handshakes.stop();
  }

  /** Registers the plugin at the record's socket, or records why not and when to ask again. */
  async register(record: SocketRecord): Promise<void> {
    const { socket } = record;
    setWake(record, { kind: 'now' });
    this.#setState(record, 'registering');
    const distrusted = this.#o.trust.dir(this.#o.dir);
    if (distrusted !== undefined) {
      this.#failed(record, distrusted);
      return;
    }
    const stranger = this.#o.trust.socket(socket, false);
    if (stranger !== undefined) {
      this.#refuseUnheard(record, stranger);
      return;
    }
    let client: Handshake;
    try {
      client = this.#handshakes.open(socket);
    } catch (error) {
      this.#failed(record, `cannot dial: ${messageOf(error)}`);
      return;
    }
    try {
      let info: PluginInfo;
      try {
        info = await client.getInfo();
      } catch (error) {
        this.#failed(record, messageOf(error));
        return;
      }
      record.info = info;
      if (this.#stopped) return;
      const check = checkInfo(info, socket, this.#o.dir, this.#o.handlers);
      if (!check.ok) {
        await this.#refuse(client, record, check.reason, { kind: 'replaced' });
        return;
      }
      const endpointStranger = check.endpoint === socket ? undefined : this.#o.trust.socket(check.endpoint, true);
      if (endpointStranger !== undefined) {
        await this.#refuse(client, record, `endpoint: ${endpointStranger}`, { kind: 'replaced' });
        return;
      }
      const claim = claimKey(info.type, info.name);
      const holder = this.#claims.get(claim);
      if (holder !== undefined && holder !== socket) {
        const named = `the ${info.type} plugin ${JSON.stringify(info.name)} is registered already, from ${holder}`;
        if (this.#leaving(holder)) {
          // The holder's socket is gone or replaced and its unregistration is on its way: not a
          // refusal (a plugin that moved its socket), just a wait for the name to be let go.
          record.error = `${named}, which is being unregistered`;
          setWake(record, { kind: 'released', claim });
          this.#setState(record, 'retrying');
          return;
        }
        await this.#refuse(client, record, named, { kind: 'released', claim });
        return;
      }
      this.#claims.set(claim, socket);
      const plugin: RegisteredPlugin = Object.freeze({
        socket,
        info,
        endpoint: check.endpoint,
        version: check.version,
      });
      let outcome;
      try {
        outcome = await check.handler.register(plugin);
      } catch (error) {
        this.#release(claim, socket);
        this.#failed(record, `the ${info.type} handler could not start it: ${messageOf(error)}`);
        return;
      }
      if (outcome !== undefined) {
        this.#release(claim, socket);
        await this.#refuse(client, record, outcome.refused, { kind: 'replaced' });
        return;
      }
      try {
        await client.notify({ registered: true, error: '' });
      } catch (error) {
        await this.#handlerUnregister(check.handler, plugin);
        this.#release(claim, socket);
        this.#failed(record, messageOf(error));
        return;
      }
      this.#o.actual.add({
        socket,
        generation: record.generation,
        ino: record.ino,
        plugin,
        handler: check.handler,
        registeredAt: this.#o.clock.now(),
      });
      record.failures = 0;
      record.error = undefined;
      this.#setState(record, 'registered');
      this.#o.logger.info(
        { socket, type: info.type, name: info.name, endpoint: check.endpoint, version: check.version },
        'plugin registered',
      );
    } finally {
      client.close();
    }
  }

  /** Unregisters a registered plugin (`record`: its socket's, shown unregistering meanwhile) and lets its name go. */
  async unregister(plugin: ActualPlugin, record: SocketRecord | undefined, why: string): Promise<void> {
    if (record !== undefined) this.#setState(record, 'unregistering');
    await this.#handlerUnregister(plugin.handler, plugin.plugin);
    this.#o.actual.remove(plugin.socket);
    this.#release(claimKey(plugin.plugin.info.type, plugin.plugin.info.name), plugin.socket);
    const { type, name } = plugin.plugin.info;
    this.#o.logger.info({ socket: plugin.socket, type, name, why }, 'plugin unregistered');
  }

  async #refuse(client: Handshake, record: SocketRecord, reason: string, wake: Wake): Promise<void> {
    record.error = reason;
    setWake(record, wake);
    this.#setState(record, 'refused');
    const { socket, info } = record;
    this.#o.logger.warn({ socket, type: info?.type, name: info?.name, reason }, 'plugin refused');
    try {
      await client.notify({ registered: false, error: reason });
    } catch (error) {
      // Refused either way; but a plugin that did not hear why would wait for an answer for good:
      // it is asked again after its backoff, and told again, until it hears (or its socket goes).
      record.failures++;
      this.#retryLater(record);
      this.#o.logger.debug(
        { socket, failures: record.failures, err: messageOf(error) },
        'a refused plugin could not be told why; telling it again after a backoff',
      );
    }
  }

  /** Refuses a socket that is not talked to (another user's): logged and shown, never dialed. */
  #refuseUnheard(record: SocketRecord, reason: string): void {
    record.error = reason;
    setWake(record, { kind: 'replaced' });
    this.#setState(record, 'refused');
    this.#o.logger.warn({ socket: record.socket, reason }, 'plugin refused');
  }

  #failed(record: SocketRecord, error: string): void {
    record.failures++;
    const repeated = record.error === error;
    record.error = error;
    this.#retryLater(record);
    this.#setState(record, 'retrying');
    const at = record.wake.kind === 'at' ? new Date(record.wake.at).toISOString() : undefined;
    const fields = { socket: record.socket, failures: record.failures, retryAt: at, error };
    // The first failure, or a new one, is news; the same failure again is not.
    if (repeated) this.#o.logger.debug(fields, 'plugin registration failed again');
    else this.#o.logger.warn(fields, 'plugin registration failed; will retry');
  }

  /** Has the socket asked again once the backoff for its failures so far is over (not once stopped). */
  #retryLater(record: SocketRecord): void {
    if (this.#stopped) {
      setWake(record, { kind: 'now' });
      return;
    }
    const delay = this.#o.backoff.delay(record.failures);
    const cancel = this.#o.clock.setTimer(delay, () => this.#host.poke(record.socket));
    setWake(record, { kind: 'at', at: this.#o.clock.now() + delay, due: this.#o.clock.monotonic() + delay, cancel });
  }

  async #handlerUnregister(handler: PluginHandler, plugin: RegisteredPlugin): Promise<void> {
    try {
      await handler.unregister(plugin);
    } catch (error) {
      this.#o.logger.error(
        { socket: plugin.socket, type: plugin.info.type, err: error },
        'a plugin handler threw from unregister (it must not)',
      );
    }
  }

  /** Lets a name go, and has every socket that waited for it asked again. */
  #release(claim: string, socket: string): void {
    if (this.#claims.get(claim) !== socket) return;
    this.#claims.delete(claim);
    this.#host.released(claim);
  }

  /** Whether a socket's plugin is about to be unregistered: its socket is gone or replaced. */
  #leaving(socket: string): boolean {
    const registered = this.#o.actual.get(socket);
    if (registered === undefined) return false;
    return this.#o.desired.get(socket)?.generation !== registered.generation;
  }

  #setState(record: SocketRecord, state: PluginState): void {
    if (record.state === state) return;
    record.state = state;
    record.since = this.#o.clock.now();
  }
}
