/**
 * What a figure was measured on and under: the CPU (model name from /proc/cpuinfo), its threads,
 * Node, the time, the command that produced it, and the machine's load (/proc/loadavg) just before
 * and just after. Every bench prints these beside its figures, so a reader can tell a figure taken
 * on a quiet machine from one taken while other work shared the cores, and figures of one CPU from
 * another's. The load averages are the kernel's (1, 5 and 15 minutes): the 1-minute one is the
 * one that speaks of a section of a minute or two.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/** The CPU model name, as /proc/cpuinfo states it ("unknown" where unreadable). */
export function cpuModel(): string {
  try {
    return /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** The 1, 5 and 15-minute load averages, as /proc/loadavg states them ("?" where unreadable). */
export function loadavg(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    return '?';
  }
}

/** One line: CPU × threads, Node, when, and the command (as the bench was started). */
export function machineLine(command: string = commandLine()): string {
  const cpu = `CPU: ${cpuModel()} × ${availableParallelism()} threads`;
  return `${cpu}; Node ${process.version}; ${new Date().toISOString()}; command: ${command}`;
}

/** The command that started this process, relative as typed (node bench/x.ts --flags). */
export function commandLine(): string {
  const script = process.argv[1]?.replace(/^.*\/(bench\/[^/]+)$/, '$1') ?? '';
  const node = ['node', script, ...process.argv.slice(2)].join(' ');
  // Started by an npm script: say which, as a reader would type it.
  const npm = process.env.npm_lifecycle_event;
  return npm === undefined ? node : `npm run ${npm} (${node})`;
}

/** Load before and after one measured section. */
export interface Load {
  readonly before: string;
  readonly after: string;
}

/** Runs `measure`, reading the load average just before and just after it. */
export async function underLoad<T>(measure: () => Promise<T> | T): Promise<{ value: T; load: Load }> {
  const before = loadavg();
  const value = await measure();
  return { value, load: { before, after: loadavg() } };
}

/** "load 1.20 0.90 0.80 → 2.10 1.10 0.85" (1, 5, 15 minutes; before → after). */
export const describeLoad = (load: Load): string => `load ${load.before} → ${load.after}`;
