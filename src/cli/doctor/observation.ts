/**
 * What `warren doctor` observed on the node, as values: the agent's answer (or why there was
 * none), containerd's config, the plugin in each CNI bin dir, the configs in the conf dir, the
 * journal dir. Gathered by doctor-command.ts, judged by checks.ts; nothing here does I/O
 * but `canonical`, the one question about paths the checks must ask the file system.
 */
import type { DoctorFacts } from '../../api/doctor.ts';
import type { ConfDirScan } from './conf-dir.ts';
import type { ContainerdConfigReading } from './containerd-config.ts';
import type { PluginInstall } from './plugin-install.ts';

/** What answered on the socket: the agent's facts, or why there were none. */
export type AgentReach =
  | { readonly kind: 'reached'; readonly socket: string; readonly facts: DoctorFacts }
  /** Nothing listens there, or it does not answer. */
  | { readonly kind: 'unreachable'; readonly socket: string; readonly reason: string }
  /**
   * Something answered, but not with facts (an agent too old to know GET /v1/doctor, a failure);
   * `httpStatus` when it answered over HTTP at all.
   */
  | {
      readonly kind: 'refused';
      readonly socket: string;
      readonly code: string;
      readonly reason: string;
      readonly httpStatus?: number;
    };

/** Where a directory the runtime uses was taken from. */
export type DirSource = 'flag' | 'agent' | 'containerd-config' | 'default';

export interface JournalDirCheck {
  readonly dir: string;
  /** Why the plugin or the agent would refuse it; absent when usable. */
  readonly problem?: string;
}

export interface NodeObservation {
  readonly agent: AgentReach;
  /** The doctor's own version, to hold against the agent's. */
  readonly doctorVersion: string;
  readonly containerdConfig: ContainerdConfigReading;
  /** The runtime's CNI bin dirs, in its search order, and the plugin as found in each. */
  readonly binDirs: { readonly from: DirSource; readonly installs: readonly PluginInstall[] };
  readonly confDir: { readonly from: DirSource; readonly scan: ConfDirScan };
  /** The agent's journal dir as the plugin would find it; with the agent's facts only. */
  readonly journalDir?: JournalDirCheck;
  /** The agent's plugins dir by the registry's rule; with the agent's facts, when its registry is on. */
  readonly pluginsDir?: JournalDirCheck;
  /**
   * A path as the file system resolves it (links followed), so `/var/run/warren/warren.sock` and
   * `/run/warren/warren.sock` compare equal where /var/run links to /run. Default: the path made
   * absolute, links not followed.
   */
  readonly canonical?: (path: string) => string;
}
