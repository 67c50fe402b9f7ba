/**
 * The `warren` command line: `warren agent` runs the node agent; the other commands ask a running
 * agent over its socket through the typed API client. Human output by default, `--json` for
 * scripts. Exit codes: 0 success, 1 the operation failed, 2 a usage error. A refusal shows the
 * agent's error code and message as the agent gave them.
 *
 * This file is the dispatch and the usage; the commands live by concern beside it
 * (state-commands.ts, allocation-commands.ts, pool-commands.ts, and the dynamically imported
 * agent, install and doctor). What they find the same way (the agent's socket, its directories) is
 * resolved once per run (context.ts) and handed to each; what they write to is io.ts's `CliIO`.
 */
import { isWarrenError, messageOf } from '../core/errors.ts';
import { WARREN_VERSION } from '../agent/server/version.ts';
import { cliContext } from './context.ts';
import { allocationsCommand, auditCommand, releaseCommand } from './allocation-commands.ts';
import { printable } from './format.ts';
import type { CliIO } from './io.ts';
import { asksForHelp, commandHelp, usage } from './help.ts';
import { acceptStoreCommand, forgetNodeCommand, nodesCommand, poolsCommand } from './pool-commands.ts';
import { journalCommand, pluginsCommand, statusCommand } from './state-commands.ts';
import { UsageError } from './usage.ts';
import { reservationsCommand } from './reservation-commands.ts';

const USAGE = usage();

export async function runCli(argv: readonly string[], io: CliIO): Promise<number> {
  const [command, ...rest] = argv;
  // A command that prints its own help (agent, doctor, podman-events) parses --help with its flags:
  // an unknown flag beside it is still a usage error there.
  const help = command === undefined || !asksForHelp(rest) ? undefined : commandHelp(command);
  if (help !== undefined) {
    io.out(help);
    return 0;
  }
  const context = cliContext(io.env);
  try {
    switch (command) {
      case 'agent': {
        const { runAgent } = await import('./agent-command.ts');
        return await runAgent(rest, io);
      }
      case 'status':
        return await statusCommand(rest, io, context);
      case 'pools':
        return await poolsCommand(rest, io, context);
      case 'reservations':
        return await reservationsCommand(rest, io, context);
      case 'allocations':
        return await allocationsCommand(rest, io, context);
      case 'release':
        return await releaseCommand(rest, io, context);
      case 'audit':
        return await auditCommand(rest, io, context);
      case 'journal':
        return await journalCommand(rest, io, context);
      case 'plugins':
        return await pluginsCommand(rest, io, context);
      case 'podman-events': {
        // Imported when run: its gRPC server library is no cost of the other commands or the agent.
        const { runPodmanEvents } = await import('./podman-events-command.ts');
        return await runPodmanEvents(rest, io, context.pluginsDir());
      }
      case 'nodes':
        return await nodesCommand(rest, io, context);
      case 'node': {
        const [verb, ...more] = rest;
        if (verb !== 'forget')
          throw new UsageError(
            verb === undefined
              ? 'node needs a verb: node forget NAME'
              : `unknown node verb "${verb}"; node forget NAME`,
          );
        return await forgetNodeCommand(more, io, context);
      }
      case 'store': {
        const [verb, ...more] = rest;
        if (verb !== 'accept')
          throw new UsageError(
            verb === undefined ? 'store needs a verb: store accept' : `unknown store verb "${verb}"; store accept`,
          );
        return await acceptStoreCommand(more, io, context);
      }
      case 'migrate': {
        // Imported when run: the Kubernetes client and the cluster tier are no cost of the other commands.
        const { migrateCommand } = await import('./migrate-command.ts');
        return await migrateCommand(rest, io, {}, context);
      }
      case 'install': {
        const { runInstall } = await import('./install.ts');
        return await runInstall(rest, io);
      }
      case 'uninstall': {
        const { uninstallCommand } = await import('./uninstall.ts');
        return await uninstallCommand(rest, io, context);
      }
      case 'doctor': {
        const { runDoctor } = await import('./doctor/doctor-command.ts');
        return await runDoctor(rest, io, { socketOf: context.socket });
      }
      case 'version':
      case '--version':
        io.out(`warren ${WARREN_VERSION}\n`);
        return 0;
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        io.out(USAGE);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      // The parser's own messages span lines: printed as lines, each escaped (an argument quoted
      // in them is the user's and may hold control characters).
      io.err(`warren: ${messageOf(error).split('\n').map(printable).join('\n')}\n\n${USAGE}`);
      return 2;
    }
    // The agent's messages quote what it was given and what it recorded. The code is the one
    // the agent answered (or the client's own: AGENT_UNREACHABLE), stable for scripts to match.
    io.err(`warren: ${isWarrenError(error) ? `${error.code}: ` : ''}${printable(messageOf(error))}\n`);
    if (isWarrenError(error, 'AGENT_UNREACHABLE')) io.err('is the agent running? start it with `warren agent`\n');
    return 1;
  }
}
