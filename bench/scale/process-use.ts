/**
 * What a process of the scale harness holds and has spent, read from /proc by its PID: resident
 * memory, open files and CPU time (user + system). The harness prints it for its own process, the
 * fake API server's and each node group's (node-groups.ts), so memory and open files per simulated
 * node are per process. Undefined where /proc cannot be read (the process gone, not Linux).
 */
import { readFileSync, readdirSync } from 'node:fs';

export interface ProcessUse {
  readonly rssMiB: number;
  readonly files: number;
  /** User + system CPU time since the process started, seconds. */
  readonly cpuSeconds: number;
}

/** The kernel's clock ticks per second (USER_HZ), what /proc/PID/stat counts CPU time in. */
const TICKS_PER_SECOND = 100;

export function processUse(pid: number | 'self'): ProcessUse | undefined {
  try {
    const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return {
      rssMiB: Number(rss) / 1024,
      files: readdirSync(`/proc/${pid}/fd`).length,
      cpuSeconds: ticks / TICKS_PER_SECOND,
    };
  } catch {
    return undefined;
  }
}
