/**
 * Warren's own file in the CNI conf dir (cni/derived-config.ts DEFAULT_OUTPUT_NAME): the config the
 * runtime uses first, which the config manager (cni-config-manager.ts) decides the content of. This
 * part holds what is true of the file whatever the manager decides:
 * - it is read bounded and non-blocking, and only when regular (core/bounded-read.ts): a FIFO, a
 *   device or a symlink to one is read as "not Warren's", never opened for a blocking read;
 * - it is only ever replaced whole (a temp file in the conf dir, fsync, rename over it, fsync of
 *   the directory: the rename is the event containerd's watcher reloads on), so it is never empty
 *   or half-written at any instant;
 * - it is removed only when it carries the generated marker: a file at Warren's name that Warren
 *   did not write is never removed.
 */
import { unlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { fsyncDirectory, writeFileAtomic } from '../../core/atomic-file.ts';
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import { type BoundedRead, readRegularFile } from '../../core/bounded-read.ts';
import { MAX_CONFIG_BYTES } from '../../cni/config-limits.ts';
import { DEFAULT_OUTPUT_NAME, isGeneratedConfig } from '../../cni/derived-config.ts';

/** One write of the file by this agent, for status. */
export interface ConfigWrite {
  readonly at: number;
  /** The primary it was derived from. */
  readonly from: string;
  /** The primary's sha256. */
  readonly sha256: string;
}

export class WarrenConfigFile {
  readonly path: string;
  readonly #clock: Clock;
  readonly #logger: Logger;
  #lastWrite: ConfigWrite | undefined;
  #writes = 0;

  constructor(confDir: string, clock: Clock, logger: Logger) {
    this.path = join(confDir, DEFAULT_OUTPUT_NAME);
    this.#clock = clock;
    this.#logger = logger;
  }

  /** This agent's last write, if any. */
  get lastWrite(): ConfigWrite | undefined {
    return this.#lastWrite;
  }

  /** How many times this agent wrote the file. */
  get writes(): number {
    return this.#writes;
  }

  /** The file as it is; anything but a regular file there is not Warren's. */
  read(): BoundedRead {
    try {
      // A config the plugin would read whole; Warren's own is a few kilobytes.
      return readRegularFile(this.path, MAX_CONFIG_BYTES);
    } catch (error) {
      return { kind: 'not-regular', what: `unreadable (${messageOf(error)})` };
    }
  }

  /** Whether the file is there and Warren wrote it (it carries the generated marker). */
  isOurs(): boolean {
    const read = this.read();
    return read.kind === 'read' && isGeneratedConfig(read.text);
  }

  /** Replaces the file whole with `text`, derived from `from`; why it failed, or undefined. */
  replace(text: string, from: string, sha256: string): string | undefined {
    try {
      writeFileAtomic(this.path, text, 0o600);
    } catch (error) {
      return `writing ${this.path} failed: ${messageOf(error)}`;
    }
    this.#lastWrite = { at: this.#clock.now(), from, sha256 };
    this.#writes += 1;
    return undefined;
  }

  /** Removes the file, only if Warren wrote it; a failure is logged. */
  remove(why: string): void {
    if (!this.isOurs()) return;
    try {
      unlinkSync(this.path);
      fsyncDirectory(dirname(this.path));
      this.#logger.info({ output: this.path }, `removed ${basename(this.path)}: ${why}`);
    } catch (error) {
      this.#logger.error({ err: error, output: this.path }, `could not remove ${basename(this.path)}`);
    }
  }
}

/** The network name a config's text carries, if any. */
export function networkOf(text: string): string | undefined {
  try {
    const name = (JSON.parse(text) as { name?: unknown }).name;
    return typeof name === 'string' ? name : undefined;
  } catch {
    return undefined;
  }
}
