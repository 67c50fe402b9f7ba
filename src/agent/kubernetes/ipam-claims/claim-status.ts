/**
 * Writes what a claim holds into its status: after an ADD took a claim's addresses, the claim's
 * `status.ips` (CIDR form: the address with its range's prefix length, as the CNI result gives it;
 * the CRD requires CIDRs) and `status.ownerPod` (the pod of that ADD) — with a merge patch of the
 * status subresource, off the ADD path (the answer never waits for it).
 *
 * Guarantees:
 * - one write per claim at a time, the last wanted status wins (a key queued again while being
 *   written is written once more after); a claim whose status (per the watch) already says what is
 *   wanted is not written: a VM restarted with its address costs one write (its new ownerPod), a
 *   retried ADD none;
 * - a failed write is retried with per-key backoff on the injected clock, `maxRetries` times, then
 *   given up on and logged (the address is held all the same: the status only reports it);
 * - a claim gone (404) is not written, nor retried.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../../core/clock.ts';
import { defined } from '../../../core/defined.ts';
import { messageOf } from '../../../core/errors.ts';
import { DEFAULT_MAX_RETRIES, RateLimitedQueue } from '../../../core/rate-limited-queue.ts';
import type { ClaimRef, ClaimView } from './claim-cache.ts';

export interface WantedClaimStatus {
  readonly ips: readonly string[];
  readonly ownerPod: string;
}

export type PatchOutcome = 'patched' | 'gone';

export interface ClaimStatusOptions {
  /** The claim as the watch holds it (no request). */
  readonly peek: (ref: ClaimRef) => ClaimView | undefined;
  /** Merge-patches the claim's status subresource; 'gone' on 404; throws on any other failure. */
  readonly patchStatus: (ref: ClaimRef, status: WantedClaimStatus) => Promise<PatchOutcome>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly maxRetries?: number;
}

export interface ClaimStatusStats {
  readonly pending: number;
  readonly written: number;
  readonly gaveUp: number;
  readonly lastError?: string;
}

const keyOf = (ref: ClaimRef): string => `${ref.namespace}/${ref.name}`;

function refOf(key: string): ClaimRef {
  const slash = key.indexOf('/');
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/** Whether the claim's status already says `wanted` (same addresses in any order, same pod). */
export function statusSays(claim: ClaimView | undefined, wanted: WantedClaimStatus): boolean {
  if (claim === undefined || claim.ownerPod !== wanted.ownerPod || claim.ips.length !== wanted.ips.length) return false;
  return wanted.ips.every((ip) => claim.ips.includes(ip));
}

export class ClaimStatusWriter {
  readonly #o: ClaimStatusOptions;
  readonly #queue: RateLimitedQueue;
  /** The status wanted per claim key, until written (or given up on). */
  readonly #wanted = new Map<string, WantedClaimStatus>();
  #written = 0;
  #gaveUp = 0;
  #lastError: string | undefined;

  constructor(options: ClaimStatusOptions) {
    this.#o = options;
    this.#queue = new RateLimitedQueue({ clock: options.clock });
  }

  /** The claim should say `status`: written soon, unless it says so already. */
  want(ref: ClaimRef, status: WantedClaimStatus): void {
    const key = keyOf(ref);
    if (statusSays(this.#o.peek(ref), status)) {
      this.#wanted.delete(key); // an older wish queued before must not overwrite it
      return;
    }
    this.#wanted.set(key, status);
    this.#queue.add(key);
  }

  /** Writes until the signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    await this.#queue.run((key) => this.#write(key), {
      signal,
      onError: (key, error) =>
        this.#o.logger.error({ claim: key, err: messageOf(error) }, 'ipamclaims: status writer failed'),
    });
  }

  stats(): ClaimStatusStats {
    return {
      pending: this.#wanted.size,
      written: this.#written,
      gaveUp: this.#gaveUp,
      ...defined({ lastError: this.#lastError }),
    };
  }

  async #write(key: string): Promise<void> {
    const wanted = this.#wanted.get(key);
    if (wanted === undefined) return;
    const ref = refOf(key);
    const done = (): void => {
      // Only what was written: a newer wish made meanwhile is written on the next run.
      if (this.#wanted.get(key) === wanted) this.#wanted.delete(key);
      this.#queue.forget(key);
    };
    if (statusSays(this.#o.peek(ref), wanted)) return done();
    try {
      const outcome = await this.#o.patchStatus(ref, wanted);
      if (outcome === 'patched') this.#written += 1;
      done();
    } catch (error) {
      this.#lastError = messageOf(error);
      if (this.#queue.retries(key) < (this.#o.maxRetries ?? DEFAULT_MAX_RETRIES)) {
        this.#queue.addRateLimited(key);
        return;
      }
      this.#gaveUp += 1;
      this.#o.logger.warn(
        { claim: key, ips: wanted.ips, err: this.#lastError },
        'ipamclaims: gave up writing the claim status (the addresses stay held)',
      );
      done();
    }
  }
}
