/**
 * Letting what is ready run, in unit tests on a manual clock. `flush()` resolves once the event
 * loop has gone round (a setImmediate): every promise callback ready when it was called, and every
 * one those queue in turn, has run by then, and ready I/O has had its turn. It never fires a
 * ManualClock's timers (only `advance` does), so "not yet" can be asserted right after it.
 *
 * `quiet()` waits for real work to finish: a test that steps a manual clock while an SQLite commit
 * syncs its file (or a peer in this process answers) steps it as many times as that work takes
 * real time, and on a loaded machine steps past a bound on the clock that the code under test
 * keeps (a wait for grants, a stall timeout). Stepping only when quiet makes how far the clock
 * goes depend on what the code waits for, never on how fast the machine is.
 */

/** Resolves after `turns` rounds of the event loop (one unless told). */
export async function flush(turns = 1): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * Requests of this process that finish by themselves, off the event loop or in the kernel: file
 * system calls (an fdatasync, through the thread pool), name lookups, a socket's connect, write,
 * shutdown or close. Handles (a listening server, an idle socket, a timer) are not in flight.
 */
const IN_FLIGHT = /^(FSReq|GetAddrInfoReqWrap|GetNameInfoReqWrap|ConnectWrap|WriteWrap|ShutdownWrap|CloseReq)/;

/** The requests of this process now in flight (IN_FLIGHT), by kind. */
export function inFlight(): string[] {
  return process.getActiveResourcesInfo().filter((kind) => IN_FLIGHT.test(kind));
}

/** How long `quiet` waits, in real time, by default: the suite's HANG_BOUND_MS (processes.ts). */
const QUIET_DEADLINE_MS = 120_000;

/**
 * Resolves once this process is quiet: no request in flight (inFlight) for `turns` rounds of the
 * event loop in a row. By then what real I/O started has finished and its callbacks, and what they
 * started in turn, have run; and a peer in this process (a server on a socket) has had a round for
 * each step of an exchange. What still waits, waits on a clock, or on a process outside this one.
 * Throws, naming what is in flight, if it is never quiet within `deadlineMs` of real time.
 */
export async function quiet(turns = 3, deadlineMs = QUIET_DEADLINE_MS): Promise<void> {
  const end = Date.now() + deadlineMs;
  for (let calm = 0; calm < turns; ) {
    await flush();
    const busy = inFlight();
    if (busy.length === 0) {
      calm += 1;
      continue;
    }
    calm = 0;
    if (Date.now() > end) throw new Error(`never quiet within ${deadlineMs} ms: ${busy.join(', ')} in flight`);
    // Polled, not spun: the thread pool's work needs the CPU this loop would take.
    await new Promise<void>((resolve) => setTimeout(resolve, 1));
  }
}
