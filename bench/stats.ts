/**
 * Percentiles that say how many samples they stand on. A tail percentile q is quoted only when at
 * least TAIL_SAMPLES samples lie beyond it (n × (1 − q) ≥ 10: p90 from 100 samples, p99 from
 * 1,000): with fewer, "p99" is the maximum or next to it, one slow call. Below that the largest
 * sample is quoted as what it is, the maximum, with n beside it.
 */

/** Samples that must lie beyond a tail percentile for it to be quoted as one. */
export const TAIL_SAMPLES = 10;

/** Below this, a product of floating-point fractions counts as a whole number (0.1 × 100 is 9.99…). */
const EPSILON = 1e-9;

/** The q-quantile of `xs` by nearest rank: the ⌈q·n⌉-th smallest, n·(1 − q) samples beyond it; NaN for none. */
export function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length - EPSILON) - 1))] ?? Number.NaN;
}

export const median = (xs: readonly number[]): number => quantile(xs, 0.5);

/** Whether `n` samples support quoting the q-quantile (always, for the median and below). */
export const supports = (n: number, q: number): boolean => q <= 0.5 || n * (1 - q) >= TAIL_SAMPLES - EPSILON;

/** The fewest samples that support the q-quantile. */
export const samplesFor = (q: number): number => (q <= 0.5 ? 1 : Math.ceil(TAIL_SAMPLES / (1 - q) - EPSILON));

/** A tail figure as it may be quoted: the percentile when the samples support it, else the maximum. */
export interface Tail {
  /** "p99", "p90", or "max" when too few samples for the percentile asked. */
  readonly label: string;
  readonly value: number;
  readonly n: number;
}

export function tail(xs: readonly number[], q: number): Tail {
  const n = xs.length;
  if (supports(n, q)) return { label: `p${Math.round(q * 100)}`, value: quantile(xs, q), n };
  return { label: 'max', value: n === 0 ? Number.NaN : Math.max(...xs), n };
}

/** "p99 4.6 ms (n=1000)" or "max 12.0 ms (n=200)". */
export const describeTail = (t: Tail, digits = 1, unit = 'ms'): string =>
  `${t.label} ${t.value.toFixed(digits)} ${unit} (n=${t.n})`;
