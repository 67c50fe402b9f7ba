/**
 * The registry's reconciler: brings the actual state (registered plugins) to the desired state
 * (sockets in the plugins directory), one socket at a time, and the operations it runs on a
 * socket: register (dial, GetInfo, check, handler.register, NotifyRegistrationStatus) and
 * unregister (handler.unregister). kubelet's reconciler, operation executor and pending-operations
 * table in one place, driven by changes instead of a one-second poll. Whether a PluginInfo can be
 * used is info-check.ts; what is known of each socket, and how status shows it, socket-record.ts;
 * the handshake calls themselves, bounded and stoppable, handshake.ts.
 *
 * Guarantees:
 * - Never runs two operations on one socket at once (a KeyedMutex on the path); pokes that arrive
 *   while a run is queued coalesce into it, so a burst of events costs one run.
 * - Tears down before it sets up: a socket whose desired entry is gone, or was replaced (a new
 *   generation: a new file, whatever its inode), is unregistered before anything else happens on
 *   it, and only then registered again.
 * - A path that was never desired changes nothing: there is nothing to tear down, and nothing is.
 * - Every handshake call is bounded on the injected clock (dial + GetInfo 1 s, notify 5 s), in
 *   handshake.ts as well as in the client, so no client, real or fake, can hold a socket's
 *   operation longer; every retry waits its backoff on that clock; a socket's failures count from
 *   its current file (a replaced socket starts at 0).
 * - Nothing is dialed while the plugins directory is not trusted (trust.ts: retried with backoff,
 *   so a directory put right is used again), nor a socket of another user than the agent's or
 *   root's (refused without a word: it is not talked to). An endpoint of such a user is refused.
 * - A refusal (PluginInfo that cannot be used, or its handler's) is told to the plugin with the reason and is not
 *   asked again until the socket is replaced; except a refusal for a name another socket holds,
 *   which is asked again when that socket lets the name go (a plugin moving its socket).
 * - A (type, name) pair is held by at most one socket, from the moment it passes the checks.
 * - After `shutdown`, no registration starts; it returns once every registered plugin has been
 *   unregistered, after whatever operation was running on its socket.
 */
import type { Logger } from 'pino';
import type { BackoffPolicy } from '../../core/backoff.ts';
import { messageOf } from '../../core/errors.ts';
import { KeyedMutex } from '../../core/keyed-mutex.ts';
import type { PluginEntry, PluginState } from '../../api/status.ts';
import type { PluginInfo } from '../../api/plugins/wire.ts';
import type { ActualPlugin, ActualState } from './actual-state.ts';
import type { DesiredState } from './desired-state.ts';
import type { PluginHandler, RegisteredPlugin } from './handler.ts';
import { type Handshake, type HandshakeOptions, Handshakes } from './handshake.ts';
import { checkInfo } from './info-check.ts';
import { type SocketRecord, type Wake, entryOf, newRecord, setWake } from './socket-record.ts';
import type { RegistryTrust } from './trust.ts';

const claimKey = (type: string, name: string): string => `${type}\0${name}`;

/** `connect`, `clock` and the handshake's bounds: handshake.ts (the clock serves for retries too). */
export interface ReconcilerOptions extends HandshakeOptions {
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

export class PluginReconciler {
  readonly #o: ReconcilerOptions;
  /** One operation per socket at a time. */
  readonly #mutex = new KeyedMutex();
  /** Sockets with a run queued but not yet started: a further poke joins it. */
  readonly #queued = new Set<string>();
  /** Runs queued or running, and who waits for none to be. */
  #runs = 0;
  #idleWaiters: Array<() => void> = [];
  /** Per socket: state for status and when to ask again; outlives no desired entry. */
  readonly #records = new Map<string, SocketRecord>();
  /** (type, name) → the socket holding it, from passing the checks until unregistered. */
  readonly #claims = new Map<string, string>();
  /** Handshake calls, bounded; stopped at shutdown so no attempt holds it up. */
  readonly #handshakes: Handshakes;
  #closed = false;

  constructor(options: ReconcilerOptions) {
    this.#o = options;
    this.#handshakes = new Handshakes(options);
  }

  /** Reconciles one socket soon: after any operation on it that is running. */
  poke(socket: string): void {
    if (this.#closed || this.#queued.has(socket)) return;
    this.#queued.add(socket);
    this.#runs++;
    void this.#mutex
      .run(socket, async () => {
        this.#queued.delete(socket);
        await this.#reconcile(socket);
      })
      .catch((error: unknown) =>
        this.#o.logger.error({ socket, err: error }, 'plugin registry: reconciling a socket failed unexpectedly'),
      )
      .finally(() => this.#ran());
  }

  /** Resolves once no run is queued or running (now, if none is). */
  idle(): Promise<void> {
    if (this.#runs === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Every known socket: those with a record, and desired ones not reached yet. */
  entries(): PluginEntry[] {
    const paths = new Set([...this.#records.keys(), ...this.#o.desired.paths()]);
    return [...paths].sort().map((socket) => this.#entry(socket));
  }

  /** Stops registering and unregisters every registered plugin; see the module header. */
  async shutdown(): Promise<void> {
    this.#closed = true;
    for (const record of this.#records.values()) setWake(record, { kind: 'now' });
    this.#handshakes.stop();
    const sockets = new Set([
      ...this.#records.keys(),
      ...this.#actual()
        .all()
        .map((p) => p.socket),
    ]);
    await Promise.all(
      [...sockets].map((socket) =>
        this.#mutex.run(socket, async () => {
          const plugin = this.#actual().get(socket);
          if (plugin !== undefined) await this.#unregister(plugin, 'Warren is stopping');
        }),
      ),
    );
    await this.idle();
  }

  #actual(): ActualState {
    return this.#o.actual;
  }

  #ran(): void {
    if (--this.#runs > 0) return;
    for (const wake of this.#idleWaiters.splice(0)) wake();
  }

  async #reconcile(socket: string): Promise<void> {
    const desired = this.#o.desired.get(socket);
    const registered = this.#actual().get(socket);
    // Tear down first: a plugin whose socket is gone, or is another socket now.
    if (
      registered !== undefined &&
      (desired === undefined || desired.generation !== registered.generation || this.#closed)
    ) {
      await this.#unregister(
        registered,
        desired === undefined ? 'its socket is gone' : this.#closed ? 'Warren is stopping' : 'its socket was replaced',
      );
    }
    let record = this.#records.get(socket);
    if (desired === undefined || this.#closed) {
      if (record !== undefined && desired === undefined) this.#forget(record);
      return;
    }
    if (record !== undefined && record.generation !== desired.generation) {
      this.#forget(record);
      record = undefined;
    }
    if (record === undefined) {
      record = newRecord(socket, desired, this.#o.clock.now());
      this.#records.set(socket, record);
    }
    if (this.#actual().get(socket) !== undefined) return; // registered from this very socket already
    const wake = record.wake;
    switch (wake.kind) {
      case 'now':
        break;
      case 'at':
        if (this.#o.clock.monotonic() < wake.due) return;
        break;
      case 'replaced':
      case 'released':
        return;
      default: {
        const never: never = wake;
        throw new Error(`unknown wake ${JSON.stringify(never)}`);
      }
    }
    await this.#register(record);
  }

  async #register(record: SocketRecord): Promise<void> {
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
      if (this.#closed) return;
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
      this.#actual().add({
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

  async #refuse(client: Handshake, record: SocketRecord, reason: string, wake: Wake): Promise<void> {
    record.error = reason;
    setWake(record, wake);
    this.#setState(record, 'refused');
    const { socket, info } = record;
    this.#o.logger.warn({ socket, type: info?.type, name: info?.name, reason }, 'plugin refused');
    try {
      await client.notify({ registered: false, error: reason });
    } catch (error) {
      // It was refused either way; a plugin that will not hear why is not Warren's failure.
      this.#o.logger.debug({ socket, err: messageOf(error) }, 'a refused plugin could not be told why');
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
    if (this.#closed) {
      setWake(record, { kind: 'now' });
    } else {
      const delay = this.#o.backoff.delay(record.failures);
      const cancel = this.#o.clock.setTimer(delay, () => this.poke(record.socket));
      setWake(record, {
        kind: 'at',
        at: this.#o.clock.now() + delay,
        due: this.#o.clock.monotonic() + delay,
        cancel,
      });
    }
    this.#setState(record, 'retrying');
    const at = record.wake.kind === 'at' ? new Date(record.wake.at).toISOString() : undefined;
    const fields = { socket: record.socket, failures: record.failures, retryAt: at, error };
    // The first failure, or a new one, is news; the same failure again is not.
    if (repeated) this.#o.logger.debug(fields, 'plugin registration failed again');
    else this.#o.logger.warn(fields, 'plugin registration failed; will retry');
  }

  async #unregister(plugin: ActualPlugin, why: string): Promise<void> {
    const record = this.#records.get(plugin.socket);
    if (record !== undefined) this.#setState(record, 'unregistering');
    await this.#handlerUnregister(plugin.handler, plugin.plugin);
    this.#actual().remove(plugin.socket);
    this.#release(claimKey(plugin.plugin.info.type, plugin.plugin.info.name), plugin.socket);
    const { type, name } = plugin.plugin.info;
    this.#o.logger.info({ socket: plugin.socket, type, name, why }, 'plugin unregistered');
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

  /** Lets a name go, and asks again every socket that waited for it. */
  #release(claim: string, socket: string): void {
    if (this.#claims.get(claim) !== socket) return;
    this.#claims.delete(claim);
    for (const record of this.#records.values()) {
      if (record.wake.kind === 'released' && record.wake.claim === claim) {
        setWake(record, { kind: 'now' });
        this.poke(record.socket);
      }
    }
  }

  /** Whether a socket's plugin is about to be unregistered: its socket is gone or replaced. */
  #leaving(socket: string): boolean {
    const registered = this.#actual().get(socket);
    if (registered === undefined) return false;
    return this.#o.desired.get(socket)?.generation !== registered.generation;
  }

  #forget(record: SocketRecord): void {
    setWake(record, { kind: 'now' });
    this.#records.delete(record.socket);
  }

  #setState(record: SocketRecord, state: PluginState): void {
    if (record.state === state) return;
    record.state = state;
    record.since = this.#o.clock.now();
  }

  #entry(socket: string): PluginEntry {
    const record = this.#records.get(socket);
    if (record === undefined) {
      const seenAt = this.#o.desired.get(socket)?.seenAt ?? this.#o.clock.now();
      return { socket, state: 'registering', since: new Date(seenAt).toISOString(), failures: 0 };
    }
    return entryOf(record, this.#actual().get(socket));
  }
}
