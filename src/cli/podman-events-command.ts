/**
 * `warren podman-events`: runs the podman adapter in the foreground until SIGTERM or SIGINT. It
 * serves Warren's `warren.event-source` plugin on a socket in the agent's plugins directory, so the
 * agent registers it (again after each agent restart: the socket stays, the agent finds it).
 */
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { systemClock } from '../core/clock.ts';
import { runPodmanAdapter } from './adapters/podman/adapter.ts';
import type { CliIO } from './io.ts';
import { UsageError } from './usage.ts';

const USAGE = `usage: warren podman-events [flags]

Follows podman's container events (podman events --format json) and serves them, with a listing
of podman's containers for resynchronisation, to the Warren agent through a unix socket in the
agent's plugins directory. The agent releases the addresses of containers podman removed even
when their CNI DEL never reached it.

flags:
  --plugins-dir DIR     the agent's plugins directory (env WARREN_PLUGINS_DIR; default: plugins
                        beside the agent socket, /run/warren/plugins as root)
  --socket-name NAME    the adapter's socket in it; default warren-podman.sock
  --podman PATH         the podman executable; default podman (on PATH)
  --netns-prefix P      the network namespace paths of podman's containers begin with this;
                        the agent releases only allocations under it on the adapter's word
                        (repeat for several); default /run/netns/netns-
  --log-level LEVEL     debug, info, warn or error; default info
  --help, -h            print this help
`;

export async function runPodmanEvents(
  argv: readonly string[],
  io: CliIO,
  defaultPluginsDir: string | undefined,
): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      'plugins-dir': { type: 'string' },
      'socket-name': { type: 'string' },
      podman: { type: 'string' },
      'netns-prefix': { type: 'string', multiple: true },
      'log-level': { type: 'string', default: 'info' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help === true) {
    io.out(USAGE);
    return 0;
  }
  const pluginsDir = values['plugins-dir'] ?? defaultPluginsDir;
  if (pluginsDir === undefined || pluginsDir === '')
    throw new UsageError(
      'podman-events needs --plugins-dir (WARREN_PLUGINS_DIR is empty: the agent runs without a registry)',
    );
  const level = values['log-level'];
  if (!['debug', 'info', 'warn', 'error'].includes(level))
    throw new UsageError(`--log-level: "${level}" is not debug, info, warn or error`);
  const logger = pino({ level, base: { adapter: 'podman' } });
  const abort = new AbortController();
  const stop = (signal: NodeJS.Signals): void => {
    logger.info({ signal }, 'stopping');
    abort.abort();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await runPodmanAdapter({
    pluginsDir,
    socketName: values['socket-name'],
    podman: values.podman,
    netnsPrefixes: values['netns-prefix'],
    env: io.env,
    logger,
    clock: systemClock,
    signal: abort.signal,
  });
  logger.info('stopped');
  return 0;
}
