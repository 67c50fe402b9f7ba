/**
 * A Kubernetes API client opened at its first use: the agent's one client for everything it asks
 * of the API server beside its store (which has its own), made once by the wiring and shared by the
 * Kubernetes sources (their lists and watches), the reads of pods, namespaces and Nodes, Events,
 * and the occasional writers (WarrenPool and WarrenReservation statuses, IPAMClaims); closed when
 * the agent stops. A source given none opens its own (tests, the command line).
 *
 * Guarantees:
 * - one client at a time: callers asking while it opens share that opening;
 * - an opening that failed is not kept: the next `get` opens again, so a kubeconfig that could not
 *   be used a moment ago (a CA or token file not mounted yet, a rotated file half written) is read
 *   again instead of failing every later write until the agent restarts;
 * - `close` closes the client if one opened; a later `get` opens a new one.
 */
import { defined } from '../../core/defined.ts';
import { KubeApiClient, type KubeApiClientOptions } from '../../store/kubernetes/api-client.ts';
import type { KubeAccess } from '../../store/kubernetes/kube-access.ts';

/** Where the client's requests are counted, and the User-Agent they carry. */
export type RequestAccounting = Pick<KubeApiClientOptions, 'requests' | 'userAgent'>;

export class OnDemandClient {
  readonly #open: () => Promise<KubeApiClient>;
  /** The opening in flight or done; undefined before the first use, after a failed one, and after close. */
  #opened: Promise<KubeApiClient> | undefined;

  constructor(open: () => Promise<KubeApiClient>) {
    this.#open = open;
  }

  /** A client of the kubeconfig's current cluster, opened at the first `get`. */
  static of(kubeConfig: KubeAccess, accounting: RequestAccounting = {}): OnDemandClient {
    return new OnDemandClient(() => KubeApiClient.open({ kubeConfig, ...defined(accounting) }));
  }

  get(): Promise<KubeApiClient> {
    if (this.#opened !== undefined) return this.#opened;
    const opening: Promise<KubeApiClient> = this.#open().catch((error: unknown) => {
      // Only this opening is dropped: one begun after a close meanwhile stays.
      if (this.#opened === opening) this.#opened = undefined;
      throw error;
    });
    this.#opened = opening;
    return opening;
  }

  close(): void {
    const opened = this.#opened;
    this.#opened = undefined;
    opened?.then((client) => client.close()).catch(() => undefined);
  }
}
