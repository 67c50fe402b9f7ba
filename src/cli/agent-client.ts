/**
 * How a command reaches the running agent: its socket by the agent's own rule (settings/table.ts), the
 * plugins directory the same way, and a typed client that waits a bounded time. Finds, never
 * creates: printing a status must not leave a state directory behind.
 */
import { ApiClient } from '../api/client.ts';
import { agentSocket, givenSetting, SETTINGS } from '../agent/settings/table.ts';
import { type DefaultContext, readRow } from '../agent/settings/row.ts';
import { findStateDir } from '../agent/settings/state-dir.ts';

/**
 * What the agent's defaults depend on, as a client sees it: the state directory of a non-root agent
 * is looked for (WARREN_STATE_DIR, else where the agent would have made it), never created.
 */
function clientContext(env: NodeJS.ProcessEnv): DefaultContext {
  const uid = process.getuid?.() ?? 0;
  const cwd = process.cwd();
  return { uid, env, cwd, stateDir: () => givenSetting('stateDir', {}, env) ?? findStateDir(env, uid, cwd) };
}

/** The socket the agent listens on, by the agent's own rule. */
export function clientSocket(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return agentSocket(flag, clientContext(env));
}

/**
 * Where the agent's plugin registry looks, by the agent's own row: WARREN_PLUGINS_DIR (empty: off),
 * else beside its socket.
 */
export function pluginsDirOfAgent(env: NodeJS.ProcessEnv): string | undefined {
  return readRow(SETTINGS.pluginsDir, undefined, clientContext(env));
}

/** The agent's missed-delete journal directory, by the agent's own row (--journal-dir, WARREN_JOURNAL_DIR). */
export function journalDirOfAgent(flag: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  return readRow(SETTINGS.journalDir, flag, clientContext(env));
}

/** The agent behind --socket (or its default); a command waits at most 30 s for an answer. */
export function client(flag: string | undefined, env: NodeJS.ProcessEnv): ApiClient {
  return new ApiClient({ socket: clientSocket(flag, env), timeoutMs: 30_000 });
}

/** The flags every command that asks the agent takes. */
export const COMMON = { socket: { type: 'string' }, json: { type: 'boolean', default: false } } as const;
