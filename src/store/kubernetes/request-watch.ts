/**
 * `ClusterTier.watchRequests` on the Kubernetes API: one watch of WarrenAddressRequests per tier,
 * open while anyone listens, telling each listener every request created or changed. What it tells
 * is a hint (cluster-tier.ts): a lender answers at once instead of at its next upkeep, a borrower
 * looks at its request at once instead of at its next poll; nothing rests on a hint arriving.
 *
 * Guarantees:
 * - one watch request open at a time, whatever the number of listeners; none while none listen,
 *   and none after `close`;
 * - the first watch starts from nothing (the requests there now come first, as ADDED: a lender that
 *   starts finds the open ones); later ones from the resourceVersion reached (bookmarks keep it
 *   fresh), from nothing again after 410 Gone;
 * - a failed or refused watch is opened again after a backoff on the clock (1 s doubling to 30 s),
 *   and a watch that ends at once is not opened again sooner than 1 s after: the API traffic of
 *   an agent's watch is bounded whatever the server does;
 * - a listener that throws is not told again less, nor are the others.
 */
import type { Clock } from '../../core/clock.ts';
import type { AddressRequest } from '../tiered/cluster-tier.ts';
import { requestOf } from './objects.ts';
import type { Resource } from './resources.ts';

const FIRST_BACKOFF_MS = 1_000;
const MAX_BACKOFF_MS = 30_000;

export class KubeRequestWatch {
  readonly #requests: Resource;
  readonly #clock: Clock;
  readonly #listeners = new Set<(request: AddressRequest) => void>();
  #abort: AbortController | undefined;
  #closed = false;

  constructor(requests: Resource, clock: Clock) {
    this.#requests = requests;
    this.#clock = clock;
  }

  /** Tells `listener` of each request created or changed from now on, until the function returned is called. */
  listen(listener: (request: AddressRequest) => void): () => void {
    const own = (request: AddressRequest) => listener(request);
    this.#listeners.add(own);
    if (this.#abort === undefined && !this.#closed) {
      const abort = new AbortController();
      this.#abort = abort;
      void this.#run(abort.signal);
    }
    return () => {
      this.#listeners.delete(own);
      if (this.#listeners.size === 0) this.#stop();
    };
  }

  close(): void {
    this.#closed = true;
    this.#listeners.clear();
    this.#stop();
  }

  #stop(): void {
    this.#abort?.abort();
    this.#abort = undefined;
  }

  #tell(object: unknown): void {
    const request = requestOf(object);
    if (request === undefined) return;
    for (const listener of [...this.#listeners]) {
      try {
        listener(request);
      } catch {
        // A listener's failure is its own: the others are still told.
      }
    }
  }

  async #run(signal: AbortSignal): Promise<void> {
    let from: string | undefined;
    let failures = 0;
    while (!signal.aborted) {
      const started = this.#clock.monotonic();
      try {
        const reached = await this.#requests.watch(
          'watch address requests',
          from,
          (type, object) => {
            if (type !== 'DELETED') this.#tell(object);
          },
          signal,
        );
        failures = 0;
        from = reached === 'gone' ? undefined : reached;
        const lasted = this.#clock.monotonic() - started;
        if (lasted < FIRST_BACKOFF_MS) await this.#pause(FIRST_BACKOFF_MS - lasted, signal);
      } catch {
        failures += 1;
        await this.#pause(Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (failures - 1)), signal);
      }
    }
  }

  #pause(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const cancel = this.#clock.setTimer(ms, () => {
        signal.removeEventListener('abort', done);
        resolve();
      });
      const done = () => {
        cancel();
        resolve();
      };
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
