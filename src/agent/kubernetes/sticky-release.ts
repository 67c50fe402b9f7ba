/**
 * Ends the sticky holdings of StatefulSet ordinals no longer covered (sticky-planner.ts): a holding
 * `statefulset/<ns>/<set>/<ordinal>` ends when the StatefulSet is gone or no longer covers the
 * ordinal (`spec.ordinals.start` <= ordinal < start + `spec.replicas`), once that has lasted the
 * grace (`--sticky-release-grace`, on the monotonic clock): a scale-down undone within it keeps the
 * addresses. ONE agent of the cluster at a time does it (the chore `sticky-release`, a Lease, as
 * the pool status writer), from a list-watch of the StatefulSets, one round per interval. While it
 * holds the chore it keeps a watch of the StatefulSets' holdings (by their kind's label) and reads
 * it each round: no listing on the interval, and nobody else watches them.
 *
 * Guarantees:
 * - never judged by what cannot be seen: nothing ends before the StatefulSets were listed, and an
 *   uncovered ordinal's grace is counted by the agent that holds the chore (another agent taking it
 *   over starts counting afresh: later, never sooner);
 * - a holding some pod is still reported using (its record's `uses`, from nodes whose agent lives)
 *   is kept until that use ends: a pod terminating slowly keeps its address;
 * - ending is allocator/holdings/ `endHolding` (the record deleted; the owner node's upkeep releases
 *   its placeholder); a round that fails is logged and retried at the next interval (a
 *   PeriodicTask: the first round one interval after `run` starts, each next one an interval
 *   after the last ended).
 */
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { PeriodicTask, type PeriodicTaskStatus } from '../../core/periodic-task.ts';
import { isPlainObject } from '../../core/validate.ts';
import { parseHolderKey } from '../../ipam/holding-key.ts';
import type { ListWatchItem } from '../../sources/kubernetes/list-watch.ts';
import type { ClusterHoldings, HoldingRecord } from '../../store/cluster-holdings.ts';
import type { RecordView } from '../../store/cluster.ts';
import type { Membership } from '../../store/store.ts';

/** The chore whose holder ends uncovered ordinals' holdings. */
export const STICKY_RELEASE_TASK = 'sticky-release';
/** Default time between two rounds. */
export const STICKY_RELEASE_INTERVAL_MS = 15_000;

/** What a StatefulSet covers: ordinals start .. start + replicas - 1. */
interface Coverage {
  readonly start: number;
  readonly replicas: number;
}

export interface StickyReleaseOptions {
  readonly records: Pick<ClusterHoldings, 'list' | 'watch'>;
  /** Ends a holder's holdings (allocator.holdings.endHolding). */
  readonly endHolding: (key: string) => Promise<readonly HoldingRecord[]>;
  readonly membership: Pick<Membership, 'claimTask' | 'liveNodes'>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How long an ordinal stays uncovered before its holding ends, ms. */
  readonly graceMs: number;
  readonly intervalMs?: number;
}

const int = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** What a StatefulSet object covers; undefined when it is none Kubernetes would serve. */
function coverageOf(object: unknown): { key: string; coverage: Coverage } | undefined {
  if (!isPlainObject(object) || !isPlainObject(object.metadata)) return undefined;
  const { name, namespace } = object.metadata;
  if (typeof name !== 'string' || typeof namespace !== 'string') return undefined;
  const spec = isPlainObject(object.spec) ? object.spec : {};
  const ordinals = isPlainObject(spec.ordinals) ? spec.ordinals : {};
  // Kubernetes defaults replicas to 1 and the first ordinal to 0.
  const replicas = spec.replicas === undefined ? 1 : int(spec.replicas) ? spec.replicas : 0;
  const start = int(ordinals.start) ? ordinals.start : 0;
  return { key: `${namespace}/${name}`, coverage: { start, replicas } };
}

export class StickyRelease {
  readonly #o: StickyReleaseOptions;
  /** `namespace/name` → what it covers, as the watch last showed. */
  #sets = new Map<string, Coverage>();
  #listed = false;
  /** Holder keys seen uncovered, and since when (monotonic ms). */
  readonly #uncoveredSince = new Map<string, number>();
  readonly #task: PeriodicTask<string[]>;
  #ended = 0;
  /** The StatefulSets' holdings, watched while this agent holds the chore. */
  #holdings: RecordView<HoldingRecord> | undefined;

  constructor(options: StickyReleaseOptions) {
    this.#o = options;
    this.#task = new PeriodicTask({
      clock: options.clock,
      intervalMs: options.intervalMs ?? STICKY_RELEASE_INTERVAL_MS,
      run: () => this.round(),
      onError: (error) =>
        options.logger.warn({ err: messageOf(error) }, 'could not end the holdings of uncovered ordinals; will retry'),
    });
  }

  /** One item of the StatefulSets' list-watch. */
  observe(item: ListWatchItem<unknown>): void {
    if (item.kind === 'listed') {
      this.#sets = new Map();
      for (const object of item.objects) {
        const read = coverageOf(object);
        if (read !== undefined) this.#sets.set(read.key, read.coverage);
      }
      this.#listed = true;
      return;
    }
    const read = coverageOf(item.object);
    if (read === undefined) return;
    if (item.kind === 'deleted') this.#sets.delete(read.key);
    else this.#sets.set(read.key, read.coverage);
  }

  /** Whether the StatefulSets' watch covers ordinal `ordinal` of `namespace/name`. */
  covers(namespace: string, name: string, ordinal: number): boolean {
    const c = this.#sets.get(`${namespace}/${name}`);
    return c !== undefined && ordinal >= c.start && ordinal < c.start + c.replicas;
  }

  /** One round: when this agent holds the chore, the holdings ended (their holder keys). */
  async round(): Promise<string[]> {
    if (!this.#listed) return [];
    const { records, membership, clock, graceMs } = this.#o;
    if (!(await membership.claimTask(STICKY_RELEASE_TASK))) {
      this.#uncoveredSince.clear(); // another agent counts; this one starts afresh if it takes over
      this.#stopWatching();
      return [];
    }
    // Read from the watch once its first listing is in; listed (once or twice) until then.
    this.#holdings ??= records.watch({ kind: 'statefulset' });
    const holdings = this.#holdings.synced ? this.#holdings.values() : await records.list({ kind: 'statefulset' });
    const byKey = new Map<string, HoldingRecord[]>();
    for (const record of holdings) byKey.set(record.key, [...(byKey.get(record.key) ?? []), record]);
    const now = clock.monotonic();
    let live: Set<string> | undefined;
    const ended: string[] = [];
    for (const [key, held] of byKey) {
      const holder = parseHolderKey(key);
      if (holder?.kind !== 'statefulset' || this.covers(holder.namespace, holder.name, holder.ordinal)) {
        this.#uncoveredSince.delete(key);
        continue;
      }
      const since = this.#uncoveredSince.get(key) ?? now;
      this.#uncoveredSince.set(key, since);
      if (since + graceMs > now) continue;
      live ??= new Set((await membership.liveNodes()).map((n) => n.node));
      const alive = live;
      if (held.some((r) => r.uses.some((u) => alive.has(u.node)))) continue; // a pod still uses it
      await this.#o.endHolding(key);
      this.#uncoveredSince.delete(key);
      ended.push(key);
    }
    for (const key of this.#uncoveredSince.keys()) if (!byKey.has(key)) this.#uncoveredSince.delete(key);
    this.#ended += ended.length;
    if (ended.length > 0) this.#o.logger.info({ holdings: ended }, 'ended the sticky addresses of uncovered ordinals');
    return ended;
  }

  /** Rounds until `signal` aborts, one per interval; settles once the round under way ended. */
  async run(signal: AbortSignal): Promise<void> {
    try {
      await this.#task.runUntil(signal);
    } finally {
      this.#stopWatching();
    }
  }

  #stopWatching(): void {
    this.#holdings?.close();
    this.#holdings = undefined;
  }

  status(): { listed: boolean; ended: number; lastError?: string; chore: PeriodicTaskStatus } {
    const chore = this.#task.status();
    return {
      listed: this.#listed,
      ended: this.#ended,
      ...defined({ lastError: chore.lastError }),
      chore,
    };
  }
}
