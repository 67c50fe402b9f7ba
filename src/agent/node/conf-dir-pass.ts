/**
 * One pass of the CNI config manager (cni-config-manager.ts) over the conf dir, and what the passes
 * found: finds the primary the way the runtime does (conf-dir-listing.ts), reads it and derives
 * Warren's config from it (primary-reading.ts), and writes that whole when it differs from
 * Warren's file (warren-config-file.ts). The manager decides when a pass runs; this part decides
 * what one does.
 *
 * Guarantees:
 * - Only content that passed the agent's ADD parser is written, and only over a file of Warren's
 *   or none.
 * - A primary that vanishes, breaks or cannot be taken over leaves the last good file in place
 *   (put back if it went missing meanwhile); the problem is in the state and the log. A different
 *   primary taking its place regenerates. Beside Multus nothing is written.
 * - Warren never takes its own output for a primary: its file name is skipped, and so is any file
 *   carrying the generated marker (an output left under another name by an earlier run).
 * - A file at Warren's name that Warren did not write is never overwritten.
 * - A host-local primary is adopted by the takeover (agent/node/host-local-takeover.ts) before
 *   Warren's file is written from it, so its reservations are imported before any ADD is served.
 * - The config derived from a host-local primary (the node's own pod CIDR) is node-local by
 *   construction (cni/node-local.ts): `nodeLocal` names it, with its ranges, while it is the one
 *   in force (derived now, or kept as the last good one).
 * - A problem is logged once, however many passes find it again.
 */
import { basename } from 'node:path';
import type { Logger } from 'pino';
import { isGeneratedConfig } from '../../cni/derived-config.ts';
import type { NodeLocalConfig } from '../../cni/node-local.ts';
import type { CniVersion } from '../../cni/spec.ts';
import type { CniConfigStatus } from '../../api/status.ts';
import { findPrimary, primaryPath, shadowing } from './conf-dir-listing.ts';
import type { HostLocalTarget } from './host-local-takeover.ts';
import { readPrimary } from './primary-reading.ts';
import { type WarrenConfigFile, networkOf } from './warren-config-file.ts';

/** What a pass needs of the manager's options (cni-config-manager.ts CniConfigManagerOptions). */
export interface ConfDirPassOptions {
  readonly confDir: string;
  readonly primaryConfig?: string | undefined;
  readonly primaryWaitMs: number;
  readonly cniVersionMax: CniVersion;
  readonly takeover?: { adopt(target: HostLocalTarget, fresh: boolean): void } | undefined;
  readonly socket?: string | undefined;
  readonly journalDir?: string | undefined;
  readonly logger: Logger;
}

/** What the passes found, as the manager's status reports it. */
export interface ConfDirFindings {
  readonly state: CniConfigStatus['state'];
  readonly primary: string | undefined;
  readonly network: string | undefined;
  readonly problem: string | undefined;
  readonly notes: readonly string[];
  readonly shadowedBy: string | undefined;
}

export class ConfDirPass {
  readonly #o: ConfDirPassOptions;
  /** Warren's file: read, replaced whole and removed only as warren-config-file.ts allows. */
  readonly #file: WarrenConfigFile;
  readonly #output: string;
  /** When the manager started, for the waiting message. */
  readonly #startedAt: number;
  /** What the last pass found; the manager's status() reports it. */
  #state: CniConfigStatus['state'] = 'waiting';
  #primary: string | undefined;
  #network: string | undefined;
  #problem: string | undefined;
  #notes: readonly string[] = [];
  #shadowedBy: string | undefined;
  /**
   * The last config derived from a good primary (written now or found current), and where from:
   * what stays, and is put back, while the primary is unusable.
   */
  #lastGood: { readonly text: string; readonly from: string; readonly sha256: string } | undefined;
  /** The last good config's network and ranges when it came from host-local (the node's own CIDR). */
  #nodeLocal: NodeLocalConfig | undefined;
  /** The last problem logged, so a repeated pass does not repeat the log line. */
  #logged: string | undefined;

  constructor(options: ConfDirPassOptions, file: WarrenConfigFile, startedAt: number) {
    this.#o = options;
    this.#file = file;
    this.#output = file.path;
    this.#startedAt = startedAt;
  }

  findings(): ConfDirFindings {
    return {
      state: this.#state,
      primary: this.#primary,
      network: this.#network,
      problem: this.#problem,
      notes: this.#notes,
      shadowedBy: this.#shadowedBy,
    };
  }

  /** The config in force when it came from a host-local primary; undefined otherwise. */
  get nodeLocal(): NodeLocalConfig | undefined {
    return this.#nodeLocal;
  }

  /**
   * One pass: finds the primary, derives Warren's config and writes it when it changed; keeps the
   * last good one when the primary cannot be used. `waitExpired`: the wait for a primary is over.
   */
  run(waitExpired: boolean): void {
    this.#shadowedBy = shadowing(this.#o.confDir, this.#output);
    const primary = findPrimary(this.#o.confDir, this.#output, this.#o.primaryConfig);
    if (primary === undefined) {
      this.#primary = undefined;
      const where =
        this.#o.primaryConfig === undefined
          ? `no CNI config in ${this.#o.confDir} other than Warren's`
          : `primary config ${primaryPath(this.#o.confDir, this.#o.primaryConfig)} is missing`;
      const wait = Math.round(this.#o.primaryWaitMs / 1000);
      const haveGood = this.#lastGood !== undefined || this.#file.isOurs();
      if (!haveGood && !waitExpired) {
        this.set('waiting', `${where} yet; waiting up to ${wait} s from ${new Date(this.#startedAt).toISOString()}`);
      } else {
        this.#keepLastGood(haveGood ? where : `${where} after waiting ${wait} s`);
      }
      return;
    }
    this.#primary = primary.path;
    const reading = readPrimary(primary, this.#o);
    if (reading.kind === 'unusable') {
      this.#keepLastGood(reading.reason);
      return;
    }
    if (reading.kind === 'multus') {
      // Multus attaches each network from its own config (Warren's ranges live in the attachment
      // definitions): nothing here is Warren's to write, and Multus' file sorting first is its design.
      this.#shadowedBy = undefined;
      this.#nodeLocal = undefined;
      this.set('beside-multus', undefined);
      return;
    }
    const { derived } = reading;
    this.#network = derived.network;
    this.#notes = derived.notes;
    const read = this.#file.read();
    if (read.kind !== 'missing' && (read.kind !== 'read' || !isGeneratedConfig(read.text))) {
      this.set(
        'stale',
        `${this.#output} exists and was not written by Warren; it is left alone and nothing is written`,
      );
      return;
    }
    const current = read.kind === 'read' ? read.text : undefined;
    // Before the file names this range: no ADD is served from it until host-local's reservations are in.
    // Fresh: the runtime used the primary for this network until now (no file of Warren's naming it).
    const fresh = current === undefined || networkOf(current) !== derived.network;
    if (derived.hostLocal !== undefined)
      this.#o.takeover?.adopt(
        { network: derived.network, dataDir: derived.hostLocal.dataDir, ranges: derived.hostLocal.ranges },
        fresh,
      );
    if (current !== derived.text) {
      if (!this.#write(derived.text, primary.path, derived.primarySha256)) return;
      this.#o.logger.info(
        {
          output: this.#output,
          primary: primary.path,
          network: derived.network,
          mainPlugin: derived.mainPlugin,
          cniVersion: derived.cniVersion,
          notes: derived.notes,
        },
        `wrote ${basename(this.#output)} from ${primary.name}`,
      );
    }
    this.#lastGood = { text: derived.text, from: primary.path, sha256: derived.primarySha256 };
    this.#nodeLocal =
      derived.hostLocal === undefined
        ? undefined
        : { network: derived.network, pools: derived.hostLocal.ranges.map((range) => range.pool) };
    this.set('current', undefined);
  }

  /** Replaces Warren's file whole; false (and state failed) when the disk refuses. */
  #write(text: string, from: string, sha256: string): boolean {
    const failed = this.#file.replace(text, from, sha256);
    if (failed !== undefined) this.set('failed', failed);
    return failed === undefined;
  }

  /**
   * The primary cannot be used now: the last good config stays, and is put back when it went
   * missing meanwhile (removed while the readiness indicator was missing, or by hand).
   */
  #keepLastGood(problem: string): void {
    const good = this.#lastGood;
    const read = this.#file.read();
    const current = read.kind === 'read' ? read.text : undefined;
    if (good !== undefined && read.kind === 'missing') {
      if (!this.#write(good.text, good.from, good.sha256)) return;
      this.#o.logger.info({ output: this.#output }, `put the last good ${basename(this.#output)} back`);
    }
    const kept =
      good !== undefined || (current !== undefined && isGeneratedConfig(current))
        ? 'keeping the last good config'
        : 'nothing written';
    this.set('stale', `${problem}; ${kept}`);
  }

  /** Records the state and its problem, logging a problem once (the level by the state). */
  set(state: CniConfigStatus['state'], problem: string | undefined): void {
    this.#state = state;
    this.#problem = problem;
    if (problem === undefined) {
      this.#logged = undefined;
      return;
    }
    if (this.#logged === problem) return;
    this.#logged = problem;
    const level = state === 'waiting' || state === 'not-ready' ? 'info' : state === 'failed' ? 'error' : 'warn';
    this.#o.logger[level]({ confDir: this.#o.confDir, state }, problem);
  }
}
