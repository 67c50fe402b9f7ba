/**
 * A real process serving a unix socket that accepts every connection and never answers (a wedged
 * agent, a hung plugin): the peer's connect succeeds and its read waits forever.
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { track, waitFor } from './processes.ts';

export interface MuteSocket {
  readonly pid: number;
  /** Connections accepted so far. */
  accepted(): number;
  /** SIGKILL (idempotent). */
  stop(): void;
}

/** Starts the process and waits until it listens on `socket`. */
export async function startMuteSocket(socket: string): Promise<MuteSocket> {
  const program = `const held = [];
require('node:net').createServer((s) => { held.push(s); s.on('error', () => {}); process.stdout.write('a\\n'); })
  .listen(${JSON.stringify(socket)}, () => process.stdout.write('listening\\n'));`;
  const child = track(spawn(process.execPath, ['-e', program], { stdio: ['ignore', 'pipe', 'inherit'] }));
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const mute: MuteSocket = {
    pid: child.pid as number,
    accepted: () => out.split('\n').filter((l) => l === 'a').length,
    stop: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
  try {
    await waitFor(`the mute process to listen on ${socket}`, () => {
      if (child.exitCode !== null) throw new Error(`the mute process exited with ${child.exitCode}`);
      return out.includes('listening') ? true : undefined;
    });
  } catch (error) {
    mute.stop();
    throw error;
  }
  return mute;
}

/** This process's open descriptors: what a client that leaks a connection per attempt grows. */
export function openDescriptors(): number {
  return readdirSync('/proc/self/fd').length;
}

/**
 * This process's descriptor count once it is within `bound` (sockets the peer closed are released
 * on the next turns of the loop), or the count after a short wait when it never gets there.
 */
export function descriptorsSettled(bound: number): Promise<number> {
  return waitFor(
    `descriptors to stay within ${bound}`,
    () => {
      const n = openDescriptors();
      return n <= bound ? n : undefined;
    },
    10_000,
  ).catch(() => openDescriptors());
}
