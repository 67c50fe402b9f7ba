/**
 * Whether etcd keeps its history in check (`Store.cluster.history` of the two-tier store on etcd), for `warren doctor`.
 * etcd keeps every revision of every key until it is compacted; an etcd started without
 * --auto-compaction-* grows its database with every ADD until it reaches its quota
 * (--quota-backend-bytes, default 2 GiB), raises NOSPACE and refuses every write.
 *
 * One reading is four cheap calls to one member, never one per ADD:
 * - Maintenance.Status: the current revision, the database's size and what of it is in use;
 * - a Range at revision 1 (count only): it fails "required revision has been compacted" once any
 *   compaction ran, and succeeds on an etcd that never compacted;
 * - Maintenance.Alarm (Get, every member): a raised NOSPACE;
 * - the member's /metrics (`etcd_server_quota_backend_bytes`, etcd 3.4 and later): its quota,
 *   which no gRPC call tells; absent when it cannot be read (metrics served elsewhere).
 *
 * Guarantees: at most one reading per interval (default a minute) reaches etcd, whoever asks
 * and how often; a reading in flight is shared; a failed reading is not kept, so the next ask
 * tries again. The sizes are the answering member's; the alarms are every member's. No answer here
 * counts for the store's continuity check (etcd-tier/continuity.ts): a member's status may lag.
 */
import { readFileSync } from 'node:fs';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { nodeHttp } from '../../core/node-http.ts';
import type { HistoryReading, StoreHistory } from '../store.ts';
import type { Etcd3, Namespace } from 'etcd3';

/** What a reading needs of the store's options (etcd-tier/tier.ts). */
export interface EtcdHistoryOptions {
  /** The first is the member whose /metrics tells the quota. */
  readonly endpoints: readonly string[];
  readonly tls?: { readonly ca?: string; readonly cert?: string; readonly key?: string } | undefined;
  /** Deadline of the metrics request, ms (the store's call timeout). */
  readonly timeout: number;
  /** Least time between two readings that reach etcd, ms. Default 60000. */
  readonly historyIntervalMs?: number | undefined;
}

/** Runs one etcd call as the store does (deadline, TRY_AGAIN naming etcd, continuity). */
export type EtcdCall = <T>(what: string, body: () => Promise<T>) => Promise<T>;

/** What etcd answers a read of a revision that compaction removed. */
const COMPACTED = /required revision has been compacted/;
const QUOTA_METRIC = /^etcd_server_quota_backend_bytes\s+(\S+)\s*$/m;

export class EtcdHistory implements StoreHistory {
  readonly #client: Etcd3;
  readonly #ns: Namespace;
  readonly #options: EtcdHistoryOptions;
  readonly #call: EtcdCall;
  readonly #now: () => number;
  #last: { readonly at: number; readonly reading: Promise<HistoryReading> } | undefined;

  constructor(client: Etcd3, ns: Namespace, options: EtcdHistoryOptions, call: EtcdCall, now = () => Date.now()) {
    this.#client = client;
    this.#ns = ns;
    this.#options = options;
    this.#call = call;
    this.#now = now;
  }

  read(): Promise<HistoryReading> {
    const now = this.#now();
    const last = this.#last;
    if (last !== undefined && now - last.at < (this.#options.historyIntervalMs ?? 60_000)) return last.reading;
    const reading = this.#readNow();
    this.#last = { at: now, reading };
    reading.catch(() => {
      if (this.#last?.reading === reading) this.#last = undefined;
    });
    return reading;
  }

  async #readNow(): Promise<HistoryReading> {
    const [client, ns, call] = [this.#client, this.#ns, this.#call];
    // Status is answered by one member from what it has applied, which may lag behind what the
    // store has seen: its header must not reach the store's continuity check (a lag would read as a
    // store gone backwards), so the answers are handed through wrapped, without a header on top.
    const { status } = await call('status', async () => ({ status: await client.maintenance.status() }));
    const compacted = await call('read revision 1', async () => {
      try {
        await ns.get('identity').revision(1).exec();
        return false;
      } catch (error) {
        if (COMPACTED.test(messageOf(error))) return true;
        throw error;
      }
    });
    const { alarmed } = await call('list alarms', async () => ({
      alarmed: await client.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' }),
    }));
    const alarms = alarmed.alarms.map(
      (a) => `${String(a.alarm).toUpperCase()} on member ${BigInt(a.memberID).toString(16)}`,
    );
    const quotaBytes = await this.#quota();
    const inUse = Number(status.dbSizeInUse);
    return {
      endpoint: this.#endpoint(),
      revision: Number(status.header.revision),
      compacted,
      dbSizeBytes: Number(status.dbSize),
      // etcd before 3.4 leaves it unset (read as 0): not known rather than empty.
      ...(Number.isFinite(inUse) && inUse > 0 ? { dbSizeInUseBytes: inUse } : {}),
      ...defined({ quotaBytes }),
      alarms,
      noSpace: alarmed.alarms.some((a) => String(a.alarm).toUpperCase() === 'NOSPACE'),
    };
  }

  #endpoint(): string {
    return this.#options.endpoints[0] ?? '';
  }

  /** The member's quota from its metrics; undefined when they cannot be read or do not say. */
  async #quota(): Promise<number | undefined> {
    try {
      const text = await this.#get(new URL('/metrics', this.#endpoint()));
      const value = Number(QUOTA_METRIC.exec(text)?.[1]);
      return Number.isFinite(value) && value > 0 ? value : undefined;
    } catch {
      return undefined;
    }
  }

  #get(url: URL): Promise<string> {
    const timeout = this.#options.timeout;
    const tls = this.#options.tls;
    return new Promise((resolveBody, reject) => {
      // node:https (and TLS) only when asked: an import would load them at every agent start.
      const send =
        url.protocol === 'https:'
          ? (process.getBuiltinModule('node:https') as typeof import('node:https')).request
          : nodeHttp.request;
      const files =
        url.protocol !== 'https:' || tls === undefined
          ? {}
          : {
              ...(tls.ca === undefined ? {} : { ca: readFileSync(tls.ca) }),
              ...(tls.cert === undefined ? {} : { cert: readFileSync(tls.cert) }),
              ...(tls.key === undefined ? {} : { key: readFileSync(tls.key) }),
            };
      const request = send(url, { method: 'GET', timeout, ...files }, (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`${url.href} answered ${res.statusCode}`));
          return;
        }
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolveBody(body));
        res.on('error', reject);
      });
      request.on('timeout', () => request.destroy(new Error(`${url.href} did not answer within ${timeout} ms`)));
      request.on('error', reject);
      request.end();
    });
  }
}
