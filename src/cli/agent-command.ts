/** `warren agent`: runs the agent in the foreground until SIGTERM or SIGINT; `--help` says how. */
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { Agent } from '../agent/agent.ts';
import { type AgentOptions, resolveAgentOptions } from '../agent/options.ts';
import { SETTINGS } from '../agent/settings.ts';
import { settingsHelp } from './format.ts';
import type { CliIO } from './main.ts';

const USAGE = `usage: warren agent [flags]

Runs the node agent in the foreground until SIGTERM or SIGINT.

flags (each also an environment variable):
${settingsHelp(Object.values(SETTINGS))}
  --help, -h                        print this help
`;

export async function runAgent(argv: readonly string[], io: CliIO): Promise<number> {
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
  for (const [key, setting] of Object.entries(SETTINGS) as Array<[keyof AgentOptions, (typeof SETTINGS)[keyof AgentOptions]]>) {
    const value = (values as Record<string, unknown>)[setting.flag];
    if (typeof value === 'string') flags[key] = value;
  }
  const resolved = resolveAgentOptions(flags, io.env);
  const logger = pino({ level: resolved.logLevel, base: { node: resolved.nodeName } });
  const agent = new Agent(resolved, { logger });
  await agent.start();
  await new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals): void => {
      logger.info({ signal }, 'stopping');
      resolve();
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await agent.stop();
  logger.info('stopped');
  return 0;
}
