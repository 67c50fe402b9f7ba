/**
 * Keeps the node's CNI config right (docs/node-cni-config.md): runs a pass (conf-dir-pass.ts:
 * find the primary config the way the runtime does, derive Warren's config from it, write it where
 * the runtime will use it first) at start and whenever the primary, Warren's own file or the
 * readiness indicator changes (config-inputs-watch.ts, rescanning for dropped events); reports what
 * the passes found, removes Warren's file on a clean stop or a hand-back when it may.
 *
 * Guarantees:
 * - Warren's file is only ever replaced whole (warren-config-file.ts: a temp file in the conf dir,
 *   fsync, rename over it, fsync of the directory: the rename is the event containerd's watcher
 *   reloads on), with content that passed the agent's ADD parser. It is never empty or invalid at
 *   any instant.
 * - A primary that vanishes, breaks or cannot be taken over leaves the last good file in place;
 *   the problem is in status and the log (conf-dir-pass.ts states how each pass keeps this).
 * - A file at Warren's name that Warren did not write is never overwritten or removed.
 * - Fails closed: nothing here removes Warren's file in a way that lets the primary's IPAM hand
 *   out Warren's addresses. While the readiness indicator is missing, Warren's file stays first
 *   (and is written as usual) and `notReady()` says why, so STATUS answers 50 and ADD 11 with the
 *   reason. `--cleanup-config-on-exit` removes the file on a clean stop only when Warren holds no
 *   address of its network (then the primary's IPAM has nothing of Warren's to hand out twice).
 *   Only handBack (`warren uninstall`, after host-local's reservations were written) removes it
 *   for good; nothing is written after that.
 * - A host-local primary is adopted by the takeover (agent/node/host-local-takeover.ts) before
 *   Warren's file is written from it, so its reservations are imported before any ADD is served.
 * - Files of the conf dir are read bounded and non-blocking, and only when regular
 *   (core/bounded-read.ts): a FIFO, a device or a symlink to one is reported, never opened for a
 *   blocking read.
 * - `nodeLocal()` names the config in force when it came from a host-local primary (the node's
 *   own pod CIDR, node-local by construction: cni/node-local.ts), until a hand-back.
 * - One pass at a time, synchronous: a change that arrives during a pass causes another pass.
 *   A pass that throws leaves the state `failed` with why; it never throws out of `poke`/`start`.
 */
import { existsSync } from 'node:fs';
import { basename } from 'node:path';
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { isGeneratedConfig } from '../../cni/derived-config.ts';
import type { NodeLocalConfig } from '../../cni/node-local.ts';
import type { CniVersion } from '../../cni/spec.ts';
import type { CniConfigStatus, TakeoverStatus } from '../../api/status.ts';
import type { HostLocalTarget } from './host-local-takeover.ts';
import { ConfDirPass } from './conf-dir-pass.ts';
import { WarrenConfigFile, networkOf } from './warren-config-file.ts';
import { watchConfigInputs } from './config-inputs-watch.ts';

export interface CniConfigManagerOptions {
  readonly confDir: string;
  /** The primary, named explicitly (absolute, or relative to the conf dir); otherwise found. */
  readonly primaryConfig?: string | undefined;
  /** How long to wait for a primary before reporting that there is none, ms. */
  readonly primaryWaitMs: number;
  /** While this file is missing the agent is not ready (Warren's config stays: it fails closed). */
  readonly readinessIndicator?: string | undefined;
  readonly cniVersionMax: CniVersion;
  /** Remove Warren's file when the agent stops cleanly, if Warren holds no address of its network. */
  readonly cleanupOnExit: boolean;
  /** Whether Warren holds an address of `network` on this node (for cleanupOnExit); absent: assume it does. */
  readonly holdsAddresses?: (network: string) => Promise<boolean>;
  /** Told of a host-local primary before Warren's file is written from it. */
  readonly takeover?: { adopt(target: HostLocalTarget, fresh: boolean): void; status(): TakeoverStatus[] } | undefined;
  /** The node was handed back (`warren uninstall`) before this start: write nothing. */
  readonly handedBack?: string | undefined;
  /** Written into the IPAM section so the plugin finds this agent (when not the plugin's defaults). */
  readonly socket?: string | undefined;
  readonly journalDir?: string | undefined;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Milliseconds between rescans of the watched directories (events dropped by the kernel). */
  readonly rescanMs?: number;
}

/** The readiness problem of an indicator file, or undefined when it is there. */
export function readinessProblem(indicator: string | undefined): string | undefined {
  if (indicator === undefined || existsSync(indicator)) return undefined;
  return `not ready: readiness indicator ${indicator} is missing`;
}

export class CniConfigManager {
  readonly #o: CniConfigManagerOptions;
  /** Warren's file: read, replaced whole and removed only as warren-config-file.ts allows. */
  readonly #file: WarrenConfigFile;
  readonly #output: string;
  /** The passes: what one does, and what they found (status() reports it). */
  readonly #passes: ConfDirPass;
  #waitExpired = false;
  #cancelWait: (() => void) | undefined;
  #running = false;
  #again = false;
  #loops: Promise<void>[] = [];
  readonly #passListeners = new Set<() => void>();
  /** Set by handBack (or given at start): nothing is written any more. */
  #handedBack: string | undefined;

  constructor(options: CniConfigManagerOptions) {
    this.#o = options;
    this.#handedBack = options.handedBack;
    this.#file = new WarrenConfigFile(options.confDir, options.clock, options.logger);
    this.#output = this.#file.path;
    this.#passes = new ConfDirPass(options, this.#file, options.clock.now());
  }

  /** Watches the conf dir (and the primary's and the indicator's directories) until the signal aborts. */
  start(signal: AbortSignal): void {
    const { confDir, primaryConfig, readinessIndicator, clock } = this.#o;
    const inputs = { confDir, primaryConfig, readinessIndicator, clock, rescanMs: this.#o.rescanMs ?? 5_000 };
    this.#loops.push(...watchConfigInputs(inputs, signal, () => this.poke()));
    this.#cancelWait = this.#o.clock.setTimer(this.#o.primaryWaitMs, () => {
      this.#waitExpired = true;
      this.poke();
    });
    signal.addEventListener('abort', () => this.#cancelWait?.(), { once: true });
    this.poke();
  }

  /**
   * Resolves when every watch has ended. With --cleanup-config-on-exit, removes Warren's file when
   * Warren holds no address of its network: with addresses held, the primary's IPAM would hand
   * them out again, so the file stays (`warren uninstall` hands a node back).
   */
  async stopped(): Promise<void> {
    await Promise.all(this.#loops);
    if (!this.#o.cleanupOnExit || this.#handedBack !== undefined) return;
    const current = this.#file.read();
    if (current.kind !== 'read' || !isGeneratedConfig(current.text)) return;
    const network = networkOf(current.text);
    let holds = true;
    try {
      holds = network === undefined || this.#o.holdsAddresses === undefined || (await this.#o.holdsAddresses(network));
    } catch (error) {
      this.#o.logger.warn({ err: error }, 'could not tell whether Warren holds addresses; keeping its config');
    }
    if (holds) {
      this.#o.logger.warn(
        { output: this.#output, network },
        `kept ${basename(this.#output)} although --cleanup-config-on-exit is on: Warren holds addresses of ` +
          `network ${network ?? '?'}, which the primary's IPAM would hand out again (run \`warren uninstall\` ` +
          `to hand the node back)`,
      );
      return;
    }
    this.#file.remove('the agent stopped holding no address of its network (--cleanup-config-on-exit on)');
  }

  /**
   * `warren uninstall`, once host-local's reservations are written: removes Warren's file (only
   * if Warren wrote it) and writes nothing from now on. Whether a file of Warren's was removed.
   */
  handBack(reason: string): boolean {
    this.#handedBack = reason;
    const current = this.#file.read();
    const ours = current.kind === 'read' && isGeneratedConfig(current.text);
    if (ours) this.#file.remove(reason);
    this.#passes.set('handed-back', reason);
    return ours && !existsSync(this.#output);
  }

  get output(): string {
    return this.#output;
  }

  /** Why the agent is not ready because of the readiness indicator; undefined when it is. */
  notReady(): string | undefined {
    return readinessProblem(this.#o.readinessIndicator);
  }

  /** Runs a pass now (and another after it, if one is running). */
  poke(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    try {
      do {
        this.#again = false;
        try {
          this.#pass();
        } catch (error) {
          // A pass that throws (a bug, a primary that defeats a parser) fails this component only:
          // reported in status, the last file left as it is, retried on the next change or rescan,
          // and never thrown into a watch loop (an unhandled rejection) or into the agent's start.
          this.#o.logger.error({ err: error }, 'CNI config pass failed');
          this.#passes.set('failed', `the CNI config pass failed: ${messageOf(error)}`);
        }
      } while (this.#again);
    } finally {
      this.#running = false;
    }
    for (const listener of [...this.#passListeners]) listener();
  }

  /** Resolves after the first pass (or now) whose status satisfies `done`. */
  whenPassed(done: (status: CniConfigStatus) => boolean, signal?: AbortSignal): Promise<CniConfigStatus> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const s = this.status();
        if (!done(s)) return;
        this.#passListeners.delete(check);
        resolve(s);
      };
      signal?.addEventListener('abort', () => {
        this.#passListeners.delete(check);
        reject(signal.reason);
      });
      this.#passListeners.add(check);
      check();
    });
  }

  /**
   * The config in force when it is node-local by construction (derived from a host-local primary:
   * the node's own pod CIDR); undefined otherwise, or before one was derived.
   */
  nodeLocal(): NodeLocalConfig | undefined {
    return this.#handedBack === undefined ? this.#passes.nodeLocal : undefined;
  }

  status(): CniConfigStatus {
    const lastWrite = this.#file.lastWrite;
    const found = this.#passes.findings();
    return {
      state: found.state,
      confDir: this.#o.confDir,
      output: this.#output,
      cniVersionMax: this.#o.cniVersionMax,
      ...defined({ primary: found.primary, network: found.network, problem: found.problem }),
      ...(found.notes.length === 0 ? {} : { notes: found.notes }),
      ...defined({ shadowedBy: found.shadowedBy }),
      ...(lastWrite === undefined
        ? {}
        : { lastWrite: { at: new Date(lastWrite.at).toISOString(), from: lastWrite.from, sha256: lastWrite.sha256 } }),
      writes: this.#file.writes,
      ...(this.#o.readinessIndicator === undefined
        ? {}
        : { readinessIndicator: { path: this.#o.readinessIndicator, present: this.notReady() === undefined } }),
      ...(this.#o.takeover === undefined || this.#o.takeover.status().length === 0
        ? {}
        : { takeover: this.#o.takeover.status() }),
    };
  }

  #pass(): void {
    if (this.#handedBack !== undefined) {
      this.#passes.set('handed-back', this.#handedBack);
      return;
    }
    this.#passes.run(this.#waitExpired);
    // Not ready fails closed: Warren's file stays first (written as usual), ADD answers 11.
    const notReady = this.notReady();
    if (notReady === undefined) return;
    const { state, problem } = this.#passes.findings();
    this.#passes.set('not-ready', state === 'current' || problem === undefined ? notReady : `${notReady}; ${problem}`);
  }
}
