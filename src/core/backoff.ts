/**
 * Backoff policy: pure arithmetic. `delay(failures)` says how long to wait after the n-th
 * consecutive failure; it never sleeps. Callers (queues, loops) apply it with their Clock.
 */
export interface BackoffPolicy {
  delay(failures: number): number;
}

export class ExponentialBackoff implements BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor: number;

  constructor(options: { initialMs?: number; maxMs?: number; factor?: number } = {}) {
    this.initialMs = options.initialMs ?? 1_000;
    this.maxMs = options.maxMs ?? 300_000;
    this.factor = options.factor ?? 2;
    if (!(this.initialMs > 0 && this.maxMs >= this.initialMs && this.factor >= 1)) {
      throw new RangeError(
        `backoff needs 0 < initial <= max and factor >= 1 (got ${this.initialMs}, ${this.maxMs}, ${this.factor})`,
      );
    }
  }

  /** 1 failure: initial; each further failure multiplies by factor, up to max. */
  delay(failures: number): number {
    if (failures <= 0) return 0;
    const d = this.initialMs * this.factor ** (failures - 1);
    return Number.isFinite(d) && d < this.maxMs ? d : this.maxMs;
  }
}
