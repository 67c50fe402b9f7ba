/**
 * The rows of the settings table (settings/table.ts) of how the agent answers CNI calls: the
 * warm-up that compiles the ADD path before the first pod, how long CNI GC spares a new
 * allocation, and how long a call waits for a database another process holds.
 */
import * as read from './readers.ts';
import type { Row } from './row.ts';

export const CNI_CALL_ROWS = {
  warmUpRounds: {
    flag: 'warm-up',
    env: 'WARREN_WARM_UP',
    about:
      'ADD/DEL rounds the agent answers itself on a throwaway in-memory store, in process, beside serving from ' +
      'its start, so the first pods do not wait for V8 to compile the ADD path; 0 for none',
    // Enough for V8 to have compiled and optimised the ADD path (BENCHMARKS.md); about 0.2 s.
    default: '150',
    read: read.wholeNumber(10_000),
  },
  gcGraceSeconds: {
    flag: 'gc-grace',
    env: 'WARREN_GC_GRACE',
    about: "seconds a new allocation is spared by CNI GC (ADDs that raced the runtime's list)",
    default: '60',
    read: read.seconds(0),
  },
  dbBusyTimeoutSeconds: {
    flag: 'db-busy-timeout',
    env: 'WARREN_DB_BUSY_TIMEOUT',
    about: 'seconds a call waits while another process holds the database, then answers try-again (CNI 11)',
    default: '5',
    read: read.seconds(0),
  },
} satisfies Record<string, Row<unknown>>;
