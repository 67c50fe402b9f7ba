/**
 * What the etcd tier keeps in step with instead of reading it again every check: the keys under one
 * prefix (or one key) of the tier's, copied in memory from one reading and then followed by an
 * etcd watch from the revision that reading was at. The etcd counterpart of the Kubernetes tier's
 * collection watch (kubernetes/collection-watch.ts): readers ask the copy (`get`, `values`) and are
 * told of each change (`listen`).
 *
 * Guarantees:
 * - requests: one reading when it opens (none when it opens `from` a revision, its copy empty); then
 *   one watch on the namespace's shared stream, from the revision after it. The etcd client resumes
 *   a watch cut (a member gone, the stream broken) itself, and this watch resumes it from the
 *   revision its events reached (the client's own resumption would start after the revision its
 *   watch was created at, skipping events a watch started in the past had not delivered yet);
 * - a watch etcd answers at a revision behind the copy's (etcd restored from an older snapshot, or
 *   wiped) is read again and watched again from that reading, never resumed from the copy's revision,
 *   where it would stay silent until etcd passed it;
 * - a watch etcd ends (its revision compacted: etcd's 410 Gone; or cancelled) is read again and
 *   watched again from that reading's revision: the copy is the reading, keys the reading lacks
 *   are told as deleted and new or changed ones as put, so a listener misses no change across a
 *   compaction, and is told none twice. A failed reading is tried again after a backoff on the
 *   clock (1 s doubling to 30 s), never on a timer while all is well;
 * - `synced` says the copy holds every change up to `revision` and the watch is live: read (or
 *   given), its watch answered, and, after a cut, `verify` (the tier's check that etcd is still the
 *   store it knew: a wiped or restored etcd accepts a resumed watch and stays silent) answered;
 *   before that the reader asks etcd itself;
 * - each answer's revision is handed to `observe` (the floor of etcd-tier/continuity.ts rises);
 * - each time the copy becomes synced again (its first reading watched, a reading after a
 *   compaction, a cut resumed and verified) `whenSynced` listeners are told: a change the copy
 *   could not replay (made and undone while it was cut) is judged then, not a timer later;
 * - a listener that throws is its own failure: the others are still told;
 * - `close` ends the watch and every timer; nothing is requested after it.
 */
import type { IKeyValue, IWatchResponse, Namespace, Watcher } from 'etcd3';
import { ExponentialBackoff } from '../../core/backoff.ts';
import { type Clock, sleepOn } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import type { TierKv } from './kv.ts';

const BACKOFF = new ExponentialBackoff({ initialMs: 1_000, maxMs: 30_000 });

export type KeyChange =
  | { readonly type: 'put'; readonly key: string; readonly kv: IKeyValue; readonly previous?: IKeyValue }
  | { readonly type: 'delete'; readonly key: string; readonly previous: IKeyValue };

export interface EtcdKeyWatchOptions {
  readonly ns: Namespace;
  readonly kv: TierKv;
  /** What is watched, in messages: `the claims of node n1`. */
  readonly what: string;
  /** The key, or the prefix of the keys, under the tier's prefix. */
  readonly key: string;
  readonly prefix: boolean;
  /**
   * Without it, the copy starts from a reading. With it, the copy starts empty and is synced once
   * the watch's answers reached this revision: the caller knows nothing of the keys was made before
   * it (a claim key, from its index key's revision: one transaction made both), and the watch
   * delivers every event from it on.
   */
  readonly from?: number;
  readonly clock: Clock;
  /** Whether the store is still the one known, asked before a watch resumed after a cut counts again. */
  readonly verify: () => Promise<void>;
  /** Told each revision an answer carried. */
  readonly observe: (revision: number) => void;
}

export interface KeyWatchStatus {
  readonly state: 'reading' | 'opening' | 'verifying' | 'watching' | 'backing-off' | 'closed';
  readonly synced: boolean;
  /** Every change up to this revision is in the copy. */
  readonly revision: number;
  /** Readings after the first (each after etcd ended the watch: a compaction). */
  readonly rereads: number;
  readonly lastError?: string;
}

export class EtcdKeyWatch {
  readonly #o: EtcdKeyWatchOptions;
  /** The copy: relative key → its key-value as last read or told. */
  readonly #copy = new Map<string, IKeyValue>();
  readonly #listeners = new Set<(change: KeyChange) => void>();
  readonly #syncedListeners = new Set<() => void>();
  readonly #abort = new AbortController();
  #state: KeyWatchStatus['state'] = 'reading';
  /** Every change up to this revision is in the copy. */
  #revision = 0;
  /** An answer must reach this revision before the copy is whole (a watch started `from`). */
  #until = 0;
  #synced = false;
  #rereads = 0;
  #lastError: string | undefined;
  #watcher: Watcher | undefined;

  constructor(options: EtcdKeyWatchOptions) {
    this.#o = options;
  }

  /** Reads (unless given what to start from), then watches, until `close`. */
  start(): void {
    void this.#run(this.#abort.signal);
  }

  get synced(): boolean {
    return this.#synced;
  }

  get revision(): number {
    return this.#revision;
  }

  get(key: string): IKeyValue | undefined {
    return this.#copy.get(key);
  }

  values(): IKeyValue[] {
    return [...this.#copy.values()];
  }

  /** Tells `listener` of every change from now on, until the function returned is called. */
  listen(listener: (change: KeyChange) => void): () => void {
    const own = (change: KeyChange) => listener(change);
    this.#listeners.add(own);
    return () => this.#listeners.delete(own);
  }

  /** Tells `listener` each time the copy becomes synced again, until the function returned is called. */
  whenSynced(listener: () => void): () => void {
    const own = () => listener();
    this.#syncedListeners.add(own);
    return () => this.#syncedListeners.delete(own);
  }

  status(): KeyWatchStatus {
    return {
      state: this.#state,
      synced: this.#synced,
      revision: this.#revision,
      rereads: this.#rereads,
      ...(this.#lastError === undefined ? {} : { lastError: this.#lastError }),
    };
  }

  close(): void {
    const watcher = this.#watcher;
    this.#watcher = undefined;
    this.#state = 'closed';
    this.#synced = false;
    this.#listeners.clear();
    this.#syncedListeners.clear();
    this.#abort.abort();
    // Not awaited: a watcher etcd ended would wait for an end that never comes. One the stream lost
    // (no id) is dropped from the client's list at once, else the client reconnects it forever.
    if (watcher !== undefined) void watcher.cancel().catch(() => undefined);
  }

  async #run(signal: AbortSignal): Promise<void> {
    const from = this.#o.from;
    let read = from !== undefined;
    if (from !== undefined) {
      this.#revision = from - 1;
      this.#until = from;
    }
    let failures = 0;
    while (!signal.aborted) {
      try {
        if (!read) {
          this.#state = 'reading';
          const { kvs, revision } = await this.#o.kv.snapshot(`read ${this.#o.what}`, this.#o.key, this.#o.prefix);
          if (signal.aborted) return;
          this.#replace(kvs, revision);
          read = true;
        }
        const answered = await this.#watch(signal);
        if (signal.aborted) return;
        // etcd ended the watch (its revision compacted, or cancelled): read again, now, unless it
        // never answered (refused outright: backed off like a failure).
        read = false;
        this.#rereads += 1;
        if (!answered) throw new Error(`etcd refused the watch of ${this.#o.what}: ${this.#lastError ?? 'no reason'}`);
        failures = 0;
      } catch (error) {
        if (signal.aborted) return;
        this.#synced = false;
        this.#lastError = messageOf(error);
        failures += 1;
        this.#state = 'backing-off';
        await sleepOn(this.#o.clock, BACKOFF.delay(failures), signal);
      }
    }
  }

  /**
   * Watches from the revision reached; resolves when etcd ends the watch, or it is closed: whether
   * etcd answered it first.
   */
  #watch(signal: AbortSignal): Promise<boolean> {
    this.#state = 'opening';
    const builder = this.#o.ns.watch();
    const scoped = this.#o.prefix ? builder.prefix(this.#o.key) : builder.key(this.#o.key);
    const watcher = scoped.startRevision(String(this.#revision + 1)).watcher();
    this.#watcher = watcher;
    let cut = false;
    let answered = false;
    return new Promise<boolean>((resolve) => {
      const end = (): void => {
        signal.removeEventListener('abort', end);
        watcher.removeAllListeners();
        watcher.on('error', () => undefined); // told by the client after its end: nobody listens any more
        if (this.#watcher === watcher) this.#watcher = undefined;
        this.#synced = false;
        resolve(answered);
      };
      signal.addEventListener('abort', end, { once: true });
      watcher.on('connected', (response: IWatchResponse) => {
        answered = true;
        const at = Number(response.header.revision);
        this.#o.observe(at);
        if (at < this.#revision) {
          // etcd is behind the copy (restored from an older snapshot, or wiped): resumed from the copy's
          // revision the watch would stay silent until etcd passed it, every change before unseen (found by
          // the soak, etcd seed 3943: a publication deleted after a restore never written again). Read again.
          this.#lastError = `etcd answered at revision ${at}, behind the ${this.#revision} watched: read again`;
          void watcher.cancel().catch(() => undefined);
          end();
          return;
        }
        if (cut) void this.#verified(watcher, signal);
        else this.#live();
      });
      watcher.on('data', (response: IWatchResponse) => this.#apply(response));
      watcher.on('disconnected', () => {
        cut = true;
        this.#synced = false;
        this.#state = 'opening';
        // Resumed from what the events reached, not from after the revision the watch was created at.
        watcher.request.start_revision = String(this.#revision + 1);
      });
      watcher.on('error', (error: Error) => {
        this.#lastError = messageOf(error);
        end();
      });
    });
  }

  /** The watch answered: live, and synced unless an answer must still reach a revision. */
  #live(): void {
    this.#state = 'watching';
    this.#sync(this.#revision >= this.#until);
  }

  /** Synced or not; telling the listeners when it becomes synced. */
  #sync(synced: boolean): void {
    const was = this.#synced;
    this.#synced = synced;
    if (!synced || was) return;
    for (const listener of [...this.#syncedListeners]) {
      try {
        listener();
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  /** After a cut: live again once the store is verified to be the one known (retried while connected). */
  async #verified(watcher: Watcher, signal: AbortSignal): Promise<void> {
    this.#state = 'verifying';
    for (let failures = 1; !signal.aborted && this.#watcher === watcher && watcher.id !== null; failures++) {
      try {
        await this.#o.verify();
        if (this.#watcher === watcher && watcher.id !== null && !signal.aborted) this.#live();
        return;
      } catch (error) {
        this.#lastError = messageOf(error);
        await sleepOn(this.#o.clock, BACKOFF.delay(failures), signal);
      }
    }
  }

  #apply(response: IWatchResponse): void {
    for (const event of response.events) {
      const key = event.kv.key.toString('utf8');
      const previous = this.#copy.get(key);
      if (event.type === 'Put') {
        this.#copy.set(key, event.kv);
        this.#tell({ type: 'put', key, kv: event.kv, ...(previous === undefined ? {} : { previous }) });
      } else if (previous !== undefined) {
        this.#copy.delete(key);
        this.#tell({ type: 'delete', key, previous });
      }
    }
    this.#o.observe(Number(response.header.revision));
    // An answer with events is complete up to its last event: a watch catching up may be sent the
    // rest of them in the next answer under the same header. One without (a progress notice) is
    // complete up to its header.
    const last = response.events.at(-1)?.kv.mod_revision;
    const revision = Number(last ?? response.header.revision);
    if (revision > this.#revision) this.#revision = revision;
    if (this.#state === 'watching' && !this.#synced && this.#revision >= this.#until) this.#sync(true);
  }

  /** The copy becomes a reading at `revision`: what it lacks told as deleted, what is new or changed as put. */
  #replace(kvs: readonly IKeyValue[], revision: number): void {
    const relative = (kv: IKeyValue) => this.#o.kv.relative(kv);
    const now = new Map(kvs.map((kv) => [relative(kv), { ...kv, key: Buffer.from(relative(kv)) }]));
    this.#revision = revision;
    this.#until = 0;
    for (const [key, previous] of [...this.#copy])
      if (!now.has(key)) {
        this.#copy.delete(key);
        this.#tell({ type: 'delete', key, previous });
      }
    for (const [key, kv] of now) {
      const previous = this.#copy.get(key);
      this.#copy.set(key, kv);
      if (previous === undefined || previous.mod_revision !== kv.mod_revision)
        this.#tell({ type: 'put', key, kv, ...(previous === undefined ? {} : { previous }) });
    }
  }

  #tell(change: KeyChange): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(change);
      } catch {
        // A listener's failure is its own: the others are still told.
      }
    }
  }
}
