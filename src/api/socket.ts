/**
 * Where the agent answers unless told otherwise: part of the contract between the agent and its
 * clients, so the plugin, the CLI and the agent name the same file. Which socket a given agent or
 * CLI uses (a flag, WARREN_SOCKET, this default as root, the state directory otherwise) is the
 * agent's settings' rule (agent/settings/node-rows.ts `agentSocket`); the plugin, which runs as the runtime's
 * root, takes its network config's `socket`, then WARREN_SOCKET, then this.
 * A file of its own: the plugin loads it on every pod start.
 */
export const DEFAULT_SOCKET = '/run/warren/warren.sock';
