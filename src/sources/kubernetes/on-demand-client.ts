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
 * - `close` closes the client if one opened; a later `get` opens a new one;
 * - `relist` tells every watch made through this client (`whenRelist`) to list its collection
 *   again: the operator accepted an API server that lost its data (docs/recovery.md), and a watch
 *   resumed from a resourceVersion the restored server has not reached yet stays silent until it
 *   passes it.
 */
import { defined } from '../../core/defined.ts';
import { Listeners } from '../../core/listeners.ts';
import { KubeApiClient, type KubeApiClientOptions } from '../../store/kubernetes/api-client.ts';
import type { KubeAccess } from '../../store/kubernetes/kube-access.ts';

/** Where the client's requests are counted, and the User-Agent they carry. */
export type RequestAccounting = Pick<KubeApiClientOptions, 'requests' | 'userAgent'>;

export class OnDemandClient {
  readonly #open: () => Promise<KubeApiClient>;
  /** The opening in flight or done; undefined before the first use, after a failed one, and after close. */
  #opened: Promise<KubeApiClient> | undefined;
  /** Told at each `relist`. */
  readonly #relists = new Listeners();

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

  /** Tells every watch through this client to list again (see the header); none fails the others. */
  relist(): void {
    this.#relists.tell();
  }

  /** Calls `listener` at each `relist`, until the function returned is called. */
  whenRelist(listener: () => void): () => void {
    return this.#relists.add(listener);
  }

  close(): void {
    const opened = this.#opened;
    this.#opened = undefined;
    opened?.then((client) => client.close()).catch(() => undefined);
  }
}
