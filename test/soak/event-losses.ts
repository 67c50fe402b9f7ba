/**
 * What may take a release Event away on the kubernetes store, as the soak's faults do it: an Event
 * is a report the agent sends once and never waits on (src/agent/kubernetes/events.ts), so one sent
 * while the API server is away is dropped, one written after a snapshot is gone when the API
 * server's etcd is restored to it, and one in flight when every connection is cut fails. The store
 * tells these spans as its steps run; the auditor asks, for each release logged without its Event,
 * which of them the Event's sending falls in (auditor.ts `#eventsAtEnd`). A missing Event that none
 * explains is listed by name: an agent that did not send one, or one over its rate limit.
 */

/** The span an Event is written in, after its release was committed: [last seen held, seen released + this] (ms). */
export const EVENT_SEND_MS = 5_000;

interface Span {
  readonly from: number;
  readonly to: number;
  readonly by: string;
}

export class EventLosses {
  readonly #spans: Span[] = [];
  /** Since when the API server is away (stopped or answering 503), until it is started again. */
  #awayFrom: number | undefined;
  /** When the snapshot the next restore goes back to was taken. */
  #snapshotAt: number | undefined;

  away(at: number): void {
    this.#awayFrom ??= at;
  }

  back(at: number): void {
    if (this.#awayFrom !== undefined) this.#spans.push({ from: this.#awayFrom, to: at, by: 'the API server away' });
    this.#awayFrom = undefined;
  }

  snapshot(at: number): void {
    this.#snapshotAt = at;
  }

  /** The API server's data put back to the last snapshot: what was written since is gone. */
  restored(at: number): void {
    if (this.#snapshotAt === undefined) return;
    this.#spans.push({ from: this.#snapshotAt, to: at, by: 'the API server restored from an older snapshot' });
    this.#snapshotAt = undefined;
  }

  /** Every connection cut: a request in flight then fails. */
  cut(at: number): void {
    this.#spans.push({ from: at, to: at, by: 'its connections cut' });
  }

  /** Which fault may have taken an Event written within [from, to] (ms); undefined when none. */
  lostBy(from: number, to: number): string | undefined {
    if (this.#awayFrom !== undefined && this.#awayFrom <= to) return 'the API server away';
    return this.#spans.find((s) => s.from <= to && s.to >= from)?.by;
  }
}
