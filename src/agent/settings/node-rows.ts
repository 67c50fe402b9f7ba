/**
 * The rows of the settings table (settings/table.ts) that place the agent on its node: its state
 * directory, socket, database, name, durability, log level and journal. Defaults: as root the
 * system paths; as another user the first state directory the agent can write (XDG state dir,
 * ~/.local/state/warren, ./.warren), so it starts anywhere. The journal's default never follows
 * --state-dir as root: the plugin writes to DEFAULT_JOURNAL_DIR unless a network config says
 * otherwise, and cannot know the agent's flags.
 *
 * The socket's rule (`agentSocket`) is shared with the CLI, which must find a running agent
 * without creating anything: it looks for the state directory where the agent makes it
 * (settings/state-dir.ts).
 */
import { hostname } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_JOURNAL_DIR } from '../../cni/journal-dir.ts';
import { DEFAULT_SOCKET } from '../../api/socket.ts';
import * as read from './readers.ts';
import { type DefaultContext, type Row, defaultOf, givenText } from './row.ts';
import { DEFAULT_STATE_DIR, defaultStateDir } from './state-dir.ts';

export const NODE_ROWS = {
  stateDir: {
    flag: 'state-dir',
    env: 'WARREN_STATE_DIR',
    about: 'state directory (database; socket and journal too when not root)',
    default: {
      says:
        `${DEFAULT_STATE_DIR} as root, otherwise the first writable of $XDG_STATE_HOME/warren, ` +
        '~/.local/state/warren, ./.warren',
      of: (c) => defaultStateDir(c.env, c.uid, c.cwd),
    },
    read: read.path,
  },
  socket: {
    flag: 'socket',
    env: 'WARREN_SOCKET',
    about: 'agent API socket',
    default: {
      says: `${DEFAULT_SOCKET} as root, <state-dir>/warren.sock otherwise`,
      of: (c) => (c.uid === 0 ? DEFAULT_SOCKET : join(c.stateDir(), 'warren.sock')),
    },
    read: read.socketPath,
  },
  database: {
    flag: 'database',
    env: 'WARREN_DATABASE',
    about: 'SQLite database file',
    default: { says: '<state-dir>/warren.db', of: (c) => join(c.stateDir(), 'warren.db') },
    read: read.path,
  },
  nodeName: {
    flag: 'node-name',
    env: 'WARREN_NODE_NAME',
    about: 'name this node records on its allocations',
    default: { says: 'the host name', of: () => hostname() },
    read: read.verbatim,
  },
  synchronous: {
    flag: 'sync',
    env: 'WARREN_SYNC',
    about: 'FULL (survives power loss) or NORMAL (survives a process crash)',
    default: 'FULL',
    read: read.oneOf(['FULL', 'NORMAL'], (text) => text.toUpperCase()),
  },
  logLevel: {
    flag: 'log-level',
    env: 'WARREN_LOG_LEVEL',
    about: 'debug, info, warn or error',
    default: 'info',
    read: read.oneOf(['debug', 'info', 'warn', 'error']),
  },
  journalDir: {
    flag: 'journal-dir',
    env: 'WARREN_JOURNAL_DIR',
    about: 'missed-delete journal',
    default: {
      says:
        `${DEFAULT_JOURNAL_DIR} as root whatever --state-dir says (where the plugin writes unless a config names ` +
        'ipam.journal_dir), <state-dir>/journal as another user ' +
        '(network configs must then name it in ipam.journal_dir)',
      of: (c) => (c.uid === 0 ? DEFAULT_JOURNAL_DIR : join(c.stateDir(), 'journal')),
    },
    read: read.path,
  },
} satisfies Record<string, Row<unknown>>;

/**
 * The agent's socket, one rule for the agent and for the CLI looking for it: --socket, else
 * WARREN_SOCKET, else the default (DEFAULT_SOCKET as root, <state-dir>/warren.sock otherwise).
 * Creates nothing: the context's `stateDir` is asked only when the default needs it, and is the
 * caller's to find (the agent makes its state directory, `defaultStateDir`; the CLI only looks
 * for one, `findStateDir`).
 */
export function agentSocket(flag: string | undefined, context: DefaultContext): string {
  return givenText(NODE_ROWS.socket, flag, context.env) ?? defaultOf(NODE_ROWS.socket, context);
}
