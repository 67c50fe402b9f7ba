/**
 * Agents as the benches start them: each with metrics on a free port of its own (127.0.0.1:0,
 * never the node's default 9464, which the first agent of a run — or any agent on this machine —
 * would hold, leaving every later one silently without metrics), and checked to serve them, so a
 * figure said to be of an agent with metrics on is one (plugins.ts benchAgent starts them so). Also
 * the agent's resident memory, read from /proc, for the memory figures. Imports nothing of the
 * test kit: the engine's child processes load this file.
 */
import { readFileSync } from 'node:fs';
import { ApiClient } from '../src/api/client.ts';

/** Metrics on a free port: what every bench agent runs with unless it turns metrics off. */
export const METRICS_ON_FREE_PORT = ['--metrics-address', '127.0.0.1:0'] as const;

/** The address the agent on `socket` serves metrics on; throws when it serves none or could not bind. */
export async function metricsAddress(socket: string): Promise<string> {
  const metrics = (await new ApiClient({ socket }).status()).metrics;
  if (metrics === undefined) throw new Error(`the agent on ${socket} serves no metrics`);
  if (metrics.error !== undefined)
    throw new Error(`the agent on ${socket} could not serve metrics on ${metrics.address}: ${metrics.error}`);
  return metrics.address;
}

/** Resident memory of process `pid` now and at its peak (VmRSS, VmHWM), MiB. */
export function residentMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string): number =>
    Number(new RegExp(`^${field}:\\s*(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}
