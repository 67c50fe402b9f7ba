/**
 * What the commands find the same way, resolved once per run from the environment (`cliContext`,
 * made by `runCli` and handed to every command): the agent's socket and a client for it, its plugins
 * and journal directories, and the cluster a migration reads. A command's own flag comes first, then
 * the environment, then the default, by the agent's own rows (settings/table.ts), so the CLI finds
 * the agent where the agent put it.
 *
 * Guarantees:
 * - finds, never creates: printing a status must not leave a state directory behind (the state
 *   directory of a non-root agent is looked for, settings/state-dir.ts `findStateDir`);
 * - lazy: nothing is read (user, working directory, state directory) until a command asks, so a
 *   command that needs none (`version`, `install`) cannot fail on it; what was found is kept for
 *   the rest of the run, a failure is not (asked again, it is looked for again).
 */
import { ApiClient } from '../api/client.ts';
import { agentSocket, givenSetting, SETTINGS } from '../agent/settings/table.ts';
import { type DefaultContext, readRow } from '../agent/settings/row.ts';
import { findStateDir } from '../agent/settings/state-dir.ts';

/** The namespace of Warren's Leases a migration opens the store with when none is named: deploy/'s. */
export const DEFAULT_MIGRATION_NAMESPACE = 'warren';

export interface CliContext {
  /** The socket the agent listens on: --socket, else WARREN_SOCKET, else the agent's default. */
  readonly socket: (flag: string | undefined) => string;
  /** The agent behind `socket(flag)`; a request waits `timeoutMs` at most for an answer (30 s unless said). */
  readonly client: (flag: string | undefined, timeoutMs?: number) => ApiClient;
  /** Where the agent's plugin registry looks: WARREN_PLUGINS_DIR (empty: off), else beside its socket. */
  readonly pluginsDir: () => string | undefined;
  /** The agent's missed-delete journal directory: --journal-dir, else WARREN_JOURNAL_DIR, else its default. */
  readonly journalDir: (flag: string | undefined) => string | undefined;
  /**
   * The kubeconfig a migration reads: --kubeconfig, else WARREN_KUBECONFIG, else kubectl's KUBECONFIG
   * (its first file: run by an operator more often than in a pod); undefined: the pod's service account.
   */
  readonly kubeconfig: (flag: string | undefined) => string | undefined;
  /**
   * The namespace of Warren's Leases a migration opens the store with (it touches none): --namespace,
   * else WARREN_NAMESPACE, else DEFAULT_MIGRATION_NAMESPACE.
   */
  readonly migrationNamespace: (flag: string | undefined) => string;
}

/** The context of a run started with `env`. */
export function cliContext(env: NodeJS.ProcessEnv): CliContext {
  let defaults: DefaultContext | undefined;
  let stateDir: string | undefined;
  // What the agent's defaults depend on, as a client sees it, read when first asked.
  const context = (): DefaultContext => {
    defaults ??= {
      uid: process.getuid?.() ?? 0,
      env,
      cwd: process.cwd(),
      stateDir: () => {
        stateDir ??= givenSetting('stateDir', {}, env) ?? findStateDir(env, context().uid, context().cwd);
        return stateDir;
      },
    };
    return defaults;
  };
  const socket = (flag: string | undefined): string => agentSocket(flag, context());
  return {
    socket,
    client: (flag, timeoutMs = 30_000) => new ApiClient({ socket: socket(flag), timeoutMs }),
    pluginsDir: () => readRow(SETTINGS.pluginsDir, undefined, context()),
    journalDir: (flag) => readRow(SETTINGS.journalDir, flag, context()),
    kubeconfig: (flag) => flag ?? env.WARREN_KUBECONFIG ?? env.KUBECONFIG?.split(':')[0],
    migrationNamespace: (flag) => flag ?? env.WARREN_NAMESPACE ?? DEFAULT_MIGRATION_NAMESPACE,
  };
}

/** The flags every command that asks the agent takes. */
export const COMMON = { socket: { type: 'string' }, json: { type: 'boolean', default: false } } as const;
