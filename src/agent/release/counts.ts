/**
 * What the release pipeline did since start, counted as it happens: per intent kind the intents
 * done with, the attempts that failed and the addresses released; and the addresses container
 * intents released by who said the container was gone (containerd, or a runtime adapter by name).
 * The reconcile pass reports the difference over a pass; status and `warren journal` read them.
 * Counts only grow, and a snapshot is a copy.
 */
import type { Allocation } from '../../ipam/allocation.ts';
import type { ReleaseIntent } from './intent.ts';

/** Per intent kind: intents done with, attempts failed, addresses released. */
export type PipelineCounts = Record<ReleaseIntent['kind'], { done: number; failed: number; addresses: number }>;

export class ReleaseCounts {
  /** Written out, not derived from a list: a new intent kind fails to compile until counted here. */
  readonly #byKind: PipelineCounts = {
    'journal-del': { done: 0, failed: 0, addresses: 0 },
    'container-deleted': { done: 0, failed: 0, addresses: 0 },
    'task-exited': { done: 0, failed: 0, addresses: 0 },
    'namespace-recheck': { done: 0, failed: 0, addresses: 0 },
    'absent-at-resync': { done: 0, failed: 0, addresses: 0 },
    'netns-gone': { done: 0, failed: 0, addresses: 0 },
    'pod-gone': { done: 0, failed: 0, addresses: 0 },
  };
  /** Addresses released by container intents, by adapter name; containerd's under `''`. */
  readonly #byAdapter = new Map<string, number>();

  /** An intent was done with, having released `released` (perhaps nothing). */
  done(intent: ReleaseIntent, released: readonly Allocation[]): void {
    const count = this.#byKind[intent.kind];
    count.done += 1;
    count.addresses += released.length;
    if ('containerID' in intent && released.length > 0) {
      const by = intent.via?.adapter ?? '';
      this.#byAdapter.set(by, (this.#byAdapter.get(by) ?? 0) + released.length);
    }
  }

  /** An attempt of an intent failed. */
  failed(intent: ReleaseIntent): void {
    this.#byKind[intent.kind].failed += 1;
  }

  /** Per intent kind, since start (a copy). */
  snapshot(): PipelineCounts {
    return structuredClone(this.#byKind);
  }

  /** Addresses container intents released on containerd's word (no `adapter`) or the named adapter's. */
  releasedBy(adapter?: string): number {
    return this.#byAdapter.get(adapter ?? '') ?? 0;
  }
}
