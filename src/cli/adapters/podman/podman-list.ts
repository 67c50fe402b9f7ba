/**
 * Listing podman's containers: `podman ps -a --format json`, run once to completion with the configured
 * binary and environment, its output read as the full IDs of every container in any state.
 *
 * Guarantees:
 * - A listing is all or nothing: if podman fails, times out or answers an entry without a full
 *   container ID, the listing rejects (IO_FAILURE) rather than return a partial list, because a
 *   container missing from a listing may have its addresses released.
 * - podman gets no more than the timeout (on the injected clock): then it is killed and the listing rejects.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Clock } from '../../../core/clock.ts';
import { WarrenError, messageOf } from '../../../core/errors.ts';
import { isPlainObject } from '../../../core/validate.ts';
import { CONTAINER_ID } from './podman-events.ts';

export interface PodmanListOptions {
  readonly podman: string;
  readonly env: NodeJS.ProcessEnv;
  readonly clock: Clock;
  /** How long `podman ps` may take. */
  readonly timeoutMs: number;
}

/** How much of podman's stderr a failure names. */
const STDERR_TAIL = 2_000;

/** The IDs in `podman ps -a --format json` output, or what is wrong with it. */
export function parsePsOutput(stdout: string): readonly string[] | string {
  let value: unknown;
  try {
    // podman 4.3 prints `[]` for no containers; blank output is read as empty too.
    value = stdout.trim() === '' ? [] : JSON.parse(stdout);
  } catch (error) {
    return `podman ps printed something that is not JSON (${messageOf(error)})`;
  }
  if (!Array.isArray(value)) return 'podman ps printed JSON that is not a list';
  const ids: string[] = [];
  for (const [i, entry] of value.entries()) {
    const id = isPlainObject(entry) ? (entry.Id ?? entry.ID) : undefined;
    if (typeof id !== 'string' || !CONTAINER_ID.test(id))
      return `podman ps entry ${i} has no full container ID (${JSON.stringify(id)?.slice(0, 80)})`;
    ids.push(id);
  }
  return ids;
}

/** The full IDs of every container podman has (any state): `podman ps -a --format json`. */
export async function listPodmanContainers(o: PodmanListOptions): Promise<readonly string[]> {
  const { stdout, stderr, code, signal, timedOut } = await runOnce(o, ['ps', '-a', '--format', 'json']);
  if (timedOut) throw new WarrenError('IO_FAILURE', `podman ps did not answer within ${o.timeoutMs} ms`);
  if (code !== 0)
    throw new WarrenError('IO_FAILURE', `podman ps failed (${code ?? signal}): ${stderr.trim().slice(-STDERR_TAIL)}`);
  const ids = parsePsOutput(stdout);
  if (typeof ids === 'string') throw new WarrenError('IO_FAILURE', ids);
  return ids;
}

/** Runs podman once to completion (killed at the list timeout). */
function runOnce(
  o: PodmanListOptions,
  args: readonly string[],
): Promise<{
  stdout: string;
  stderr: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
}> {
  return new Promise((resolve, reject) => {
    let child: ChildProcess;
    try {
      child = spawn(o.podman, args, { env: o.env, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      reject(new WarrenError('IO_FAILURE', `podman ${args[0]} could not start: ${messageOf(error)}`, { cause: error }));
      return;
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    child.stdout?.on('data', (b: Buffer) => out.push(b));
    child.stderr?.on('data', (b: Buffer) => err.push(b));
    const cancel = o.clock.setTimer(o.timeoutMs, () => {
      timedOut = true;
      child.kill('SIGKILL');
    });
    child.once('error', (error) => {
      cancel();
      reject(new WarrenError('IO_FAILURE', `podman ${args[0]} failed: ${error.message}`, { cause: error }));
    });
    child.once('close', (code, signal) => {
      cancel();
      resolve({
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        code,
        signal,
        timedOut,
      });
    });
  });
}
