/**
 * Letting what is ready run, in unit tests on a manual clock. `flush()` resolves once the event
 * loop has gone round (a setImmediate): every promise callback ready when it was called, and every
 * one those queue in turn, has run by then, and ready I/O has had its turn. It never fires a
 * ManualClock's timers (only `advance` does), so "not yet" can be asserted right after it.
 */

/** Resolves after `turns` rounds of the event loop (one unless told). */
export async function flush(turns = 1): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
