/**
 * `warren agent`: runs the agent in the foreground until SIGTERM or SIGINT; `--help` says how.
 * Exits 0 after a signal; 1, saying why, when the start fails, a part the agent cannot serve
 * without fails (Agent.failed), or anything throws that nothing caught — never half-alive.
 */
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { Agent, type AgentDeps } from '../agent/agent.ts';
import { type AgentOptions, resolveAgentOptions } from '../agent/settings/options.ts';
import { SETTINGS } from '../agent/settings/table.ts';
import { settingsHelp } from './format.ts';
import type { CliIO } from './io.ts';
import { messageOf } from '../core/errors.ts';
import { armFailpoints } from '../core/failpoints.ts';

/** The exit code of an agent that stopped because something failed (main.ts: 1, the operation failed). */
const EXIT_FAILED = 1;

const USAGE = `usage: warren agent [flags]

Runs the node agent in the foreground until SIGTERM or SIGINT.

flags (each also an environment variable):
${settingsHelp(Object.values(SETTINGS))}
  --help, -h                        print this help
`;

/**
 * Runs the agent with `argv`'s flags. `build` reaches what no flag does (the cluster benchmark's
 * ranges in one key); `warren agent` passes nothing.
 */
export async function runAgent(
  argv: readonly string[],
  io: CliIO,
  build: Pick<AgentDeps, 'blocks'> = {},
): Promise<number> {
  const options = {
    ...Object.fromEntries(Object.values(SETTINGS).map((s) => [s.flag, { type: 'string' as const }])),
    help: { type: 'boolean' as const, short: 'h' },
  };
  const { values } = parseArgs({ args: [...argv], options, strict: true });
  if (values.help === true) {
    io.out(USAGE);
    return 0;
  }
  const flags: Partial<Record<keyof AgentOptions, string>> = {};
  for (const [key, setting] of Object.entries(SETTINGS) as Array<
    [keyof AgentOptions, (typeof SETTINGS)[keyof AgentOptions]]
  >) {
    const value = (values as Record<string, unknown>)[setting.flag];
    if (typeof value === 'string') flags[key] = value;
  }
  const resolved = resolveAgentOptions(flags, io.env);
  // Fault tests only (core/failpoints.ts): a bad name is refused here, as a bad flag is.
  armFailpoints(io.env);
  const logger = pino({ level: resolved.logLevel, base: { node: resolved.nodeName } });
  // Anything thrown that nothing caught leaves the agent in a state nobody knows: it ends the
  // process, saying what, with a non-zero exit, so the supervisor starts a whole agent again
  // rather than one answering ADD with a part gone. (The store is crash-safe; a stale socket and
  // the locks are cleared by the next start.)
  const fatal =
    (what: string) =>
    (error: unknown): void => {
      logger.fatal({ err: error }, `${what}: ${messageOf(error)}; the agent exits`);
      io.err(`warren agent: ${what}: ${messageOf(error)}\n`);
      process.exit(EXIT_FAILED);
    };
  process.on('uncaughtException', fatal('uncaught exception'));
  process.on('unhandledRejection', fatal('unhandled promise rejection'));
  const agent = new Agent(resolved, { logger, ...build });
  try {
    await agent.start();
  } catch (error) {
    // start() stopped what it had started; should anything still hold the event loop open, the
    // process ends anyway once the error has been reported.
    setTimeout(() => process.exit(EXIT_FAILED), 5_000).unref();
    throw error;
  }
  const code = await new Promise<number>((resolve) => {
    const stop = (signal: NodeJS.Signals): void => {
      logger.info({ signal }, 'stopping');
      resolve(0);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    void agent.failed.then((error) => {
      logger.fatal({ err: error }, `stopping: ${error.message}`);
      io.err(`warren agent: ${error.message}\n`);
      resolve(EXIT_FAILED);
    });
  });
  // Stopped is stopped: should anything still hold the event loop open, the process ends anyway a
  // second later, saying what held it. The soak on etcd sees a connection to an etcd member outlive
  // the store's close after members were killed or etcd restored (TCPSocketWrap: a watch or lease
  // stream etcd3 leaves open; a unary call has its deadline): one stop in four or five waited 5 s for it.
  const exitAnyway = (exit: number): number => {
    setTimeout(() => {
      const holding = process.getActiveResourcesInfo();
      logger.warn({ holding }, 'stopped, but something still held the process open after 1 s: exiting');
      process.exit(exit);
    }, 1_000).unref();
    return exit;
  };
  try {
    await agent.stop();
  } catch (error) {
    logger.error({ err: error }, 'stopped, with failures');
    return exitAnyway(EXIT_FAILED);
  }
  logger.info('stopped');
  return exitAnyway(code);
}
