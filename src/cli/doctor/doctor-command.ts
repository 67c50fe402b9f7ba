/**
 * `warren doctor [--json]`: checks the node end to end and says how to fix each finding. It asks
 * the running agent for its setup (GET /v1/doctor), reads what the runtime reads (containerd's
 * config, the CNI bin dirs, the configs in the conf dir) and the journal dir, and holds the two
 * against each other (checks.ts). An agent that does not answer is itself a finding: the node's
 * files are still judged.
 *
 * Read-only: it creates, changes and removes nothing, not even a missing journal dir.
 * Exit codes: 0 when no finding is an error, 1 when any is, 2 on a usage error.
 */
import { lstatSync, realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ApiClient } from '../../api/client.ts';
import { AnsweredError } from '../../api/errors.ts';
import { isWarrenError, messageOf } from '../../core/errors.ts';
import { checkJournalDir } from '../../cni/journal-dir.ts';
import { pluginsDirProblem } from '../../agent/registry/trust.ts';
import { DEFAULT_CNI_CONF_DIR } from '../../agent/settings/table.ts';
import { WARREN_VERSION } from '../../agent/server/version.ts';
import type { CliIO } from '../io.ts';
import { UsageError } from '../usage.ts';
import { diagnose } from './checks.ts';
import { scanConfDir } from './conf-dir.ts';
import {
  type ContainerdConfigReading,
  DEFAULT_CNI_BIN_DIR,
  DEFAULT_CONTAINERD_CONFIG,
  readContainerdConfig,
} from './containerd-config.ts';
import { exitCodeOf } from './finding.ts';
import type { AgentReach, DirSource, JournalDirCheck, NodeObservation } from './observation.ts';
import { inspectPluginInstall } from './plugin-install.ts';
import { renderHuman, renderJson } from './report.ts';

export const DOCTOR_USAGE = `usage: warren doctor [flags]

Checks this node end to end: the agent reachable on its socket; the plugin installed in the CNI
bin dirs the runtime uses (containerd's config, when readable); the configs in the conf dir that
name warren, and their socket, journal dir and store against the agent's; the journal dir; the
network namespace directories the agent observes and the allocations recorded under them;
containerd; the store's health and durability; the clock against etcd; the metrics endpoint.
Each finding that is not ok says how to fix it. Exit 0 when no finding is an error, 1 when any is.

flags:
  --socket PATH             the agent's socket (env WARREN_SOCKET)
  --json                    { ok, findings: [{ id, severity, title, detail, fix }] }
  --cni-conf-dir DIR        where the runtime reads network configs; default the agent's
                            --cni-conf-dir when it manages the config, else containerd's
                            conf_dir, else ${DEFAULT_CNI_CONF_DIR}
  --cni-bin-dir DIR         where the runtime looks for plugins, in its order (repeat, or a
                            comma-separated list); default containerd's, else ${DEFAULT_CNI_BIN_DIR}
  --containerd-config FILE  containerd's config; default ${DEFAULT_CONTAINERD_CONFIG}
`;

const FLAGS = {
  socket: { type: 'string' },
  json: { type: 'boolean', default: false },
  'cni-conf-dir': { type: 'string' },
  'cni-bin-dir': { type: 'string', multiple: true },
  'containerd-config': { type: 'string' },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

export interface DoctorDeps {
  /** The agent's socket by the command line's rule, from --socket (undefined when not given). */
  readonly socketOf: (flag: string | undefined) => string;
}

/** A path with links followed; for one that does not exist (yet), its parent's. */
export function canonicalPath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    try {
      return join(realpathSync(dirname(path)), basename(path));
    } catch {
      return resolve(path);
    }
  }
}

/** The journal dir by the plugin's and agent's own rule, without creating it when it is missing. */
export function inspectJournalDir(dir: string): JournalDirCheck {
  return inspectTrustedDir(dir, (d) => {
    try {
      checkJournalDir(d);
      return undefined;
    } catch (error) {
      return messageOf(error);
    }
  });
}

/** The plugins dir by the registry's own rule (the journal dir's), without creating it when it is missing. */
export function inspectPluginsDir(dir: string): JournalDirCheck {
  return inspectTrustedDir(dir, pluginsDirProblem);
}

function inspectTrustedDir(dir: string, problemOf: (dir: string) => string | undefined): JournalDirCheck {
  try {
    lstatSync(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return {
      dir,
      problem:
        code === 'ENOENT'
          ? 'does not exist (the agent makes it when it starts: was it removed, or is it on another mount?)'
          : `cannot be examined: ${messageOf(error)}`,
    };
  }
  const problem = problemOf(dir);
  return problem === undefined ? { dir } : { dir, problem };
}

async function reachAgent(socket: string): Promise<AgentReach> {
  try {
    const facts = await new ApiClient({ socket, timeoutMs: 10_000 }).doctor();
    return { kind: 'reached', socket, facts };
  } catch (error) {
    if (isWarrenError(error, 'AGENT_UNREACHABLE')) return { kind: 'unreachable', socket, reason: messageOf(error) };
    const code = isWarrenError(error) ? error.code : 'INTERNAL';
    const httpStatus = error instanceof AnsweredError ? { httpStatus: error.httpStatus } : {};
    return { kind: 'refused', socket, code, reason: messageOf(error), ...httpStatus };
  }
}

/** The bin dirs: as given (repeated, or comma-separated), else containerd's, else the default. */
function binDirsOf(
  given: readonly string[] | undefined,
  reading: ContainerdConfigReading,
): { from: DirSource; dirs: readonly string[] } {
  const flagged = (given ?? []).flatMap((g) => g.split(',')).filter((d) => d !== '');
  if (given !== undefined && flagged.length === 0) throw new UsageError('--cni-bin-dir needs a directory');
  if (flagged.length > 0) return { from: 'flag', dirs: flagged };
  if (reading.kind === 'read') return { from: 'containerd-config', dirs: reading.settings.binDirs };
  return { from: 'default', dirs: [DEFAULT_CNI_BIN_DIR] };
}

/** The conf dir: as given, else the one the agent writes to, else containerd's, else the agent's, else the default. */
function confDirOf(
  given: string | undefined,
  reach: AgentReach,
  reading: ContainerdConfigReading,
): { from: DirSource; dir: string } {
  if (given !== undefined) {
    if (given === '') throw new UsageError('--cni-conf-dir needs a directory');
    return { from: 'flag', dir: given };
  }
  const facts = reach.kind === 'reached' ? reach.facts : undefined;
  if (facts?.manageCniConfig === true) return { from: 'agent', dir: facts.cniConfDir };
  if (reading.kind === 'read') return { from: 'containerd-config', dir: reading.settings.confDir };
  if (facts !== undefined) return { from: 'agent', dir: facts.cniConfDir };
  return { from: 'default', dir: DEFAULT_CNI_CONF_DIR };
}

/** Everything the checks judge, gathered from the agent and the node's files. */
export async function observeNode(options: {
  socket: string;
  cniConfDir?: string | undefined;
  cniBinDirs?: readonly string[] | undefined;
  containerdConfig?: string | undefined;
}): Promise<NodeObservation> {
  const containerdConfig = readContainerdConfig(options.containerdConfig ?? DEFAULT_CONTAINERD_CONFIG);
  const bin = binDirsOf(options.cniBinDirs, containerdConfig);
  const agent = await reachAgent(options.socket);
  const conf = confDirOf(options.cniConfDir, agent, containerdConfig);
  return {
    agent,
    doctorVersion: WARREN_VERSION,
    containerdConfig,
    binDirs: { from: bin.from, installs: bin.dirs.map(inspectPluginInstall) },
    confDir: { from: conf.from, scan: scanConfDir(conf.dir) },
    ...(agent.kind === 'reached' ? { journalDir: inspectJournalDir(agent.facts.journalDir) } : {}),
    ...(agent.kind === 'reached' && agent.facts.pluginsDir !== undefined
      ? { pluginsDir: inspectPluginsDir(agent.facts.pluginsDir) }
      : {}),
    canonical: canonicalPath,
  };
}

export async function runDoctor(argv: readonly string[], io: CliIO, deps: DoctorDeps): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: FLAGS, strict: true, allowPositionals: false });
  if (values.help) {
    io.out(DOCTOR_USAGE);
    return 0;
  }
  const node = await observeNode({
    socket: deps.socketOf(values.socket),
    cniConfDir: values['cni-conf-dir'],
    cniBinDirs: values['cni-bin-dir'],
    containerdConfig: values['containerd-config'],
  });
  const findings = diagnose(node);
  io.out(values.json ? renderJson(findings) : renderHuman(findings));
  return exitCodeOf(findings);
}
