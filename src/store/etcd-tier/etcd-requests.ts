/**
 * The agent's own requests to etcd, counted: every message the etcd tier's client sends (client.ts
 * counts them where they leave, in a gRPC interceptor on every call) is told here once, by kind, so
 * an operator sees what the agent costs etcd (`warren_etcd_requests_total`, and the rate in `warren
 * status` and `warren doctor`), as the Kubernetes store's requests are (kubernetes/api-requests.ts).
 *
 * Guarantees:
 * - one count per message that left for etcd, as etcd's own `grpc_server_msg_received_total` counts
 *   it: each call (`range`, `put`, `txn`, `delete`, `lease-grant`...), each keep-alive of a lease on
 *   its stream (`lease-keepalive`), each watch created or cancelled on the watch stream
 *   (`watch-create`, `watch-cancel`), not per event received; a call the client tries again on
 *   another member is sent again, so it counts again;
 * - the kind is read from the gRPC method and, on the watch stream, the message, so no caller is
 *   told to count: a call made anywhere in the tier (or by the etcd3 library itself) counts alike;
 *   kinds are etcd's own API's, a bounded list;
 * - the rate is taken over the last `windowMinutes` on the injected clock (core/minute-counts.ts).
 */
import type { Clock } from '../../core/clock.ts';
import { MinuteCounts, mostFirst } from '../../core/minute-counts.ts';

/** The kind of one request to etcd: `range`, `txn`, `lease-keepalive`, `watch-create`... */
export type EtcdRequestKind = string;

/** The agent's request rate to etcd over the last minutes. */
export interface EtcdRequestRate {
  /** The minutes the rate is taken over (fewer while the agent is younger). */
  readonly minutes: number;
  /** Requests per minute, every kind. */
  readonly perMinute: number;
  /** Requests per minute by kind, the kinds sent only, most first. */
  readonly byKind: readonly { readonly kind: EtcdRequestKind; readonly perMinute: number }[];
}

/** The kinds whose name is not the method's own, kebab-cased (`LeaseGrant` is `lease-grant`). */
const NAMED: Readonly<Record<string, EtcdRequestKind>> = {
  DeleteRange: 'delete',
  LeaseKeepAlive: 'lease-keepalive',
  LeaseTimeToLive: 'lease-ttl',
};

/** The watch stream's requests, by the field their message sets. */
const WATCH_REQUESTS: Readonly<Record<string, EtcdRequestKind>> = {
  create_request: 'watch-create',
  cancel_request: 'watch-cancel',
  progress_request: 'watch-progress',
};

/** The kind of a message sent on the gRPC method `path` (`/etcdserverpb.KV/Range`). */
export function etcdRequestKindOf(path: string, message: unknown): EtcdRequestKind {
  const method = path.slice(path.lastIndexOf('/') + 1);
  if (method === 'Watch') {
    const field = Object.keys(typeof message === 'object' && message !== null ? message : {}).find(
      (key) => WATCH_REQUESTS[key] !== undefined,
    );
    return field === undefined ? 'watch' : (WATCH_REQUESTS[field] as EtcdRequestKind);
  }
  return (
    NAMED[method] ??
    method
      .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '')
  );
}

export class EtcdRequestCounter {
  /** Since the start, by kind: what the metric exposes. */
  readonly #totals = new Map<EtcdRequestKind, number>();
  /** The last minutes, by kind: the rate. */
  readonly #recent: MinuteCounts;

  constructor(clock: Clock, windowMinutes = 10) {
    this.#recent = new MinuteCounts(clock, windowMinutes);
  }

  /** One request of `kind` sent. */
  count(kind: EtcdRequestKind): void {
    this.#totals.set(kind, (this.#totals.get(kind) ?? 0) + 1);
    this.#recent.add(kind);
  }

  /** Every kind counted since the start. */
  totals(): { readonly kind: EtcdRequestKind; readonly count: number }[] {
    return [...this.#totals].map(([kind, count]) => ({ kind, count }));
  }

  /** The rate over the last `windowMinutes` up to now. */
  rate(): EtcdRequestRate {
    const { minutes, counts, perMinute } = this.#recent.window();
    let all = 0;
    const byKind: { kind: EtcdRequestKind; perMinute: number }[] = [];
    for (const [kind, n] of counts) {
      all += n;
      byKind.push({ kind, perMinute: perMinute(n) });
    }
    byKind.sort(mostFirst((k) => k.kind));
    return { minutes, perMinute: perMinute(all), byKind };
  }
}
