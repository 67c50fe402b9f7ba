/**
 * What an agent on a cluster store remembers across its restarts, in `cluster.json` in its state
 * directory: which start of it last announced this node (so that a restart after kill -9 takes its
 * own announcement over instead of waiting out the lease), and the identity of each store it has
 * written to, per key prefix (so that a store that lost its data while the agent was down is
 * recognised when it comes back). The state directory is the agent's (0700, locked): the file is
 * still read as untrusted input, and a file that does not parse is named and ignored, never fatal.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { writeFileAtomic } from '../../core/atomic-file.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { isPlainObject } from '../../core/validate.ts';
import type { AnnounceInfo } from '../../store/store.ts';

export const CLUSTER_RECORD = 'cluster.json';

interface RecordFile {
  /** The instance of the last start. */
  instance?: string;
  /** Store identity per store: etcd's key prefix, or `kubernetes:<namespace>` (settings/store-kind.ts). */
  identities?: Record<string, string>;
}

/** The kernel's id of this boot; undefined where there is none (not Linux). */
function bootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** This process's pid namespace (`pid:[inode]`): a recorded pid names a process only in it. */
function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}

export class ClusterRecord {
  readonly #path: string;
  readonly #prefix: string;
  #file: RecordFile;
  /** This start: a fresh instance id, published in the announcement. */
  readonly instance: Omit<AnnounceInfo, 'since' | 'version'>;

  /** Reads the record (a missing or unreadable one is empty: `warn` is told why) and makes this start's instance. */
  constructor(stateDir: string, prefix: string, warn: (message: string) => void) {
    this.#path = join(stateDir, CLUSTER_RECORD);
    this.#prefix = prefix;
    this.#file = {};
    try {
      const parsed: unknown = JSON.parse(readFileSync(this.#path, 'utf8'));
      if (!isPlainObject(parsed)) throw new Error('not a JSON object');
      const { instance, identities } = parsed;
      this.#file = {
        ...(typeof instance === 'string' ? { instance } : {}),
        ...(isPlainObject(identities)
          ? {
              identities: Object.fromEntries(
                Object.entries(identities).filter((e): e is [string, string] => typeof e[1] === 'string'),
              ),
            }
          : {}),
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
        warn(
          `${this.#path} is unreadable, ignored (a restart then waits out this node's old announcement): ` +
            `${messageOf(error)}`,
        );
    }
    const previous = this.#file.instance;
    const boot = bootId();
    this.instance = {
      instance: randomUUID(),
      host: hostname(),
      pid: process.pid,
      ...defined({ bootId: boot, pidNamespace: pidNamespace(), previous }),
    };
  }

  /** The identity of the store under this prefix, as recorded at the last run. */
  get identity(): string | undefined {
    return this.#file.identities?.[this.#prefix];
  }

  /** Records this start as the one that announces the node; before it announces. */
  recordInstance(): void {
    this.#file = {
      ...this.#file,
      ...defined({ instance: this.instance.instance }),
    };
    this.#write();
  }

  /** Records the store's identity as verified (after each announcement, and after `warren store accept`). */
  recordIdentity(identity: string | undefined): void {
    if (identity === undefined || identity === this.identity) return;
    this.#file = { ...this.#file, identities: { ...this.#file.identities, [this.#prefix]: identity } };
    this.#write();
  }

  #write(): void {
    writeFileAtomic(this.#path, `${JSON.stringify(this.#file, null, 2)}\n`);
  }
}
