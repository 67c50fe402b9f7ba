/**
 * A node's wall clock, steppable while its processes run: what NTP does to a node when it steps
 * the clock back or forward. Every process of the node (its agent, and the plugin the runtime
 * runs there, whose journal entries carry the plugin's wall clock) is started with libfaketime
 * preloaded, reading its offset from this node's file; a step rewrites the file, and within
 * CACHE_SECONDS every process of the node sees the new wall clock. The monotonic clock is left
 * alone, as NTP leaves it (Warren measures graces and rests on it: docs/never-leaking.md).
 *
 * libfaketime is Debian's (scripts/setup.sh installs it). The static forwarder is not affected by
 * the preload, and needs not be: it reads no clock; the TypeScript plugin it falls back to is.
 * Where the library is missing, `available` is false and the soak plans no clock steps.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const LIBRARY = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1';
/** How often a faked process reads its offset file again (seconds). */
const CACHE_SECONDS = 1;

export class SteppedWallClock {
  readonly #file: string;
  /** The node's wall clock ahead of the real one (seconds; negative: behind). */
  #offset = 0;

  /** Whether this machine can step a process's wall clock (libfaketime installed). */
  static get available(): boolean {
    return existsSync(LIBRARY);
  }

  /** The offset file is kept in `dir` (the node's own directory, removed with it). */
  constructor(dir: string) {
    this.#file = join(dir, 'wall-clock-offset');
    this.#write();
  }

  get offsetSeconds(): number {
    return this.#offset;
  }

  /** The environment a process of this node starts with; empty where the library is missing. */
  env(): Record<string, string> {
    if (!SteppedWallClock.available) return {};
    return {
      LD_PRELOAD: LIBRARY,
      FAKETIME_TIMESTAMP_FILE: this.#file,
      FAKETIME_CACHE_DURATION: String(CACHE_SECONDS),
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    };
  }

  /** Steps the node's wall clock by `seconds` (back when negative), as NTP's step does. */
  step(seconds: number): void {
    this.#offset += seconds;
    this.#write();
  }

  #write(): void {
    writeFileSync(this.#file, `${this.#offset >= 0 ? '+' : ''}${this.#offset}\n`);
  }
}
