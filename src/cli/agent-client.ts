/**
 * How a command reaches the running agent: its socket by the agent's own rule (settings/table.ts), the
 * plugins directory the same way, and a typed client that waits a bounded time. Finds, never
 * creates: printing a status must not leave a state directory behind.
 */
import { ApiClient } from '../api/client.ts';
import { agentSocket, givenSetting, pluginsDirOf } from '../agent/settings/table.ts';
import { findStateDir } from '../agent/settings/state-dir.ts';

/**
 * The socket the agent listens on, by the agent's own rule; the state directory of a non-root
 * agent is looked for (WARREN_STATE_DIR, else where the agent would have made it), never created.
 */
export function clientSocket(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  const uid = process.getuid?.() ?? 0;
  const cwd = process.cwd();
  return agentSocket(flag, { uid, env, cwd, stateDir: () => givenSetting('stateDir', {}, env) ?? findStateDir(env, uid, cwd) });
}

/** Where the agent's plugin registry looks, by the agent's own rule (WARREN_PLUGINS_DIR, else beside its socket). */
export function pluginsDirOfAgent(env: NodeJS.ProcessEnv): string | undefined {
  return pluginsDirOf(givenSetting('pluginsDir', {}, env), clientSocket(undefined, env), process.cwd()).pluginsDir;
}

/** The agent behind --socket (or its default); a command waits at most 30 s for an answer. */
export function client(flag: string | undefined, env: NodeJS.ProcessEnv): ApiClient {
  return new ApiClient({ socket: clientSocket(flag, env), timeoutMs: 30_000 });
}

/** The flags every command that asks the agent takes. */
export const COMMON = { socket: { type: 'string' }, json: { type: 'boolean', default: false } } as const;
