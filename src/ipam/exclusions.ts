/**
 * A range's excluded addresses (its `exclude` entries, and what else was taken out of it) as runs,
 * built once per range and kept while the range is: what picking an address and checking a
 * reservation skip. Apart from range.ts so that the plugin, which reads ranges, never loads runs.
 */
import type { RangeSpec } from './range.ts';
import { RunSet } from './run-set.ts';

const exclusionCache = new WeakMap<RangeSpec, RunSet>();

/** The range's excluded addresses as runs (built once per range). */
export function exclusionSet(range: RangeSpec): RunSet {
  let set = exclusionCache.get(range);
  if (set === undefined) {
    set = new RunSet();
    for (const [a, b] of range.excluded) set.addRange(a, b);
    exclusionCache.set(range, set);
  }
  return set;
}
