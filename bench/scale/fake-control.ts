/**
 * What the scale harness asks of the fake API server (test/helpers/fake-kube-api.ts), in whichever
 * process the fake runs: each node's own kubeconfig, the fake's clock set to the harness's, how
 * many of the requests recorded so far are answered, and a window's counts (every request and
 * every watch event delivered, by node). The harness holds it directly when the fake runs in its
 * own process (`in-process`), and fake-api-process.ts serves it over IPC when the fake runs in a
 * child (`child`), so both places answer with one code.
 *
 * Guarantees:
 * - the fake's time is the harness's: `setNow` sets what it stamps on objects (the nodes' clock is
 *   a ManualClock, and the fake must not read the wall clock while the harness runs minutes of
 *   clock in seconds);
 * - `progress` counts a record as answered once its status is set (a watch's once its 200 went
 *   out) and looks at each record once, so a poll costs the records made since the last one;
 * - `counts` carries only the fields the window's arithmetic reads (window-counts.ts), so a
 *   window's records cross a process boundary small.
 */
import type {
  ConnectionCounts,
  DeliveredEvents,
  FakeKubeApi,
  RequestRecord,
} from '../../test/helpers/fake-kube-api.ts';
import { startFakeKubeApi } from '../../test/helpers/fake-kube-api.ts';

/** A request as a window counts it (window-counts.ts). */
export type CountedRequest = Pick<RequestRecord, 'client' | 'verb' | 'method' | 'resource' | 'path' | 'status'>;

/** How far the server got: requests recorded since the window began, and those not answered yet. */
export interface ServerProgress {
  readonly records: number;
  readonly unanswered: number;
}

/** What a window cost, as the server saw it. */
export interface ServerCounts {
  readonly records: readonly CountedRequest[];
  readonly events: readonly DeliveredEvents[];
}

export class FakeControl {
  readonly api: FakeKubeApi;
  /** The harness's clock, as last set: what the fake stamps. */
  #nowMs: number;
  /** Records before this index are answered. */
  #answered = 0;

  private constructor(api: FakeKubeApi, nowMs: number) {
    this.api = api;
    this.#nowMs = nowMs;
  }

  /** Starts a fake serving Warren's CRDs, its clock at `nowMs` until set (`http2`: offered by ALPN). */
  static async start(nowMs: number, http2 = false): Promise<FakeControl> {
    let control: FakeControl | undefined;
    const api = await startFakeKubeApi({
      crds: 'deploy',
      http2,
      now: () => new Date(control === undefined ? nowMs : control.#nowMs),
    });
    control = new FakeControl(api, nowMs);
    return control;
  }

  /** The kubeconfig the server's own token is in (the auditor's). */
  adminKubeconfig(): string {
    return this.api.kubeconfigPath;
  }

  kubeconfigFor(node: string): string {
    return this.api.clientKubeconfig(node);
  }

  setNow(ms: number): void {
    this.#nowMs = ms;
  }

  progress(): ServerProgress {
    const records = this.api.requests;
    if (this.#answered > records.length) this.#answered = 0; // the records were cleared
    while (this.#answered < records.length && records[this.#answered]?.status !== 0) this.#answered++;
    return { records: records.length, unanswered: records.length - this.#answered };
  }

  clearCounts(): void {
    this.api.clearRequests();
    this.#answered = 0;
  }

  counts(): ServerCounts {
    const records = this.api.requests.map(({ client, verb, method, resource, path, status }) => ({
      client,
      verb,
      method,
      resource,
      path,
      status,
    }));
    return { records, events: this.api.watchEvents() };
  }

  /** Open watch streams by resource, for the resources given. */
  watchCounts(resources: readonly string[]): Record<string, number> {
    return Object.fromEntries(resources.map((r) => [r, this.api.watchCount(r)]));
  }

  connections(): ConnectionCounts {
    return this.api.connectionCounts();
  }

  stop(): Promise<void> {
    return this.api.stop();
  }
}
