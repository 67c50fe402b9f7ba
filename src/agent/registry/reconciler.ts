/**
 * The registry's reconciler: brings the actual state (registered plugins) to the desired state
 * (sockets in the plugins directory), one socket at a time, by running on each socket the
 * operation it needs (operation-executor.ts: register, unregister). kubelet's reconciler and
 * pending-operations table in one place, driven by changes instead of a one-second poll. What is
 * known of each socket, and how status shows it, is socket-record.ts.
 *
 * Guarantees:
 * - Never runs two operations on one socket at once (a KeyedMutex on the path); pokes that arrive
 *   while a run is queued coalesce into it, so a burst of events costs one run.
 * - Tears down before it sets up: a socket whose desired entry is gone, or was replaced (a new
 *   generation: a new file, whatever its inode), is unregistered before anything else happens on
 *   it, and only then registered again.
 * - A path that was never desired changes nothing: there is nothing to tear down, and nothing is.
 * - A socket's failures count from its current file (a replaced socket starts at 0); one waiting
 *   for its backoff is not registered before it is due on the injected monotonic clock; one refused
 *   is not asked again until the socket is replaced, or, refused for a name another socket holds,
 *   until that socket lets the name go (a plugin moving its socket). The operations' own
 *   guarantees (bounds, trust, refusals, one socket per name) are operation-executor.ts's.
 * - After `shutdown`, no registration starts; it returns once every registered plugin has been
 *   unregistered, after whatever operation was running on its socket.
 */
import { KeyedMutex } from '../../core/keyed-mutex.ts';
import type { PluginEntry } from '../../api/status.ts';
import type { ActualPlugin, ActualState } from './actual-state.ts';
import { type OperationExecutorOptions, PluginOperationExecutor } from './operation-executor.ts';
import { type SocketRecord, entryOf, newRecord, setWake } from './socket-record.ts';

/** The plugins directory, its handlers, the two states and what the operations need: operation-executor.ts. */
export type ReconcilerOptions = OperationExecutorOptions;

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
  /** The operations run on a socket; stopped at shutdown so no attempt holds it up. */
  readonly #operations: PluginOperationExecutor;
  #closed = false;

  constructor(options: ReconcilerOptions) {
    this.#o = options;
    this.#operations = new PluginOperationExecutor(options, {
      poke: (socket) => this.poke(socket),
      released: (claim) => this.#released(claim),
    });
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
    this.#operations.stop();
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
    await this.#operations.register(record);
  }

  /** Asks again every socket that waited for `claim`, now let go. */
  #released(claim: string): void {
    for (const record of this.#records.values()) {
      if (record.wake.kind === 'released' && record.wake.claim === claim) {
        setWake(record, { kind: 'now' });
        this.poke(record.socket);
      }
    }
  }

  #unregister(plugin: ActualPlugin, why: string): Promise<void> {
    return this.#operations.unregister(plugin, this.#records.get(plugin.socket), why);
  }

  #forget(record: SocketRecord): void {
    setWake(record, { kind: 'now' });
    this.#records.delete(record.socket);
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
