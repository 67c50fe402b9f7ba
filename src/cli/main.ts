/**
 * The `warren` command line: `warren agent` runs the node agent; the other commands ask a running
 * agent over its socket through the typed API client. Human output by default, `--json` for
 * scripts. Exit codes: 0 success, 1 the operation failed, 2 a usage error. A refusal shows the
 * agent's error code and message as the agent gave them.
 */
import { parseArgs } from 'node:util';
import { WarrenError, isWarrenError, messageOf } from '../core/errors.ts';
import { blockCidrOfKey } from '../ipam/blocks.ts';
import { ApiClient } from '../api/client.ts';
import type { Allocation, AllocationQuery, CniConfigStatus, PluginEntry, ReconcileReport, ReleaseRequest } from '../api/protocol.ts';
import { SETTINGS, agentSocket, givenSetting, pluginsDirOf } from '../agent/options.ts';
import { findStateDir } from '../agent/state-dir.ts';
import { WARREN_VERSION } from '../agent/version.ts';
import { age, percent, printable, safe, settingsHelp, table } from './format.ts';
import { UsageError } from './usage.ts';
import { runPodmanEvents } from './podman-events-command.ts';

const USAGE = `usage: warren <command> [flags]

commands:
  agent          run the node agent (flags below, each also an environment variable)
  status         show the agent's state
  pools          show utilisation per pool
  allocations    list allocations (filters: --pool --network --container --ifname
                 --namespace --pod --pod-uid --node --address)
  release        release --address A [--pool P], or --container ID [--network N] [--ifname I]
                 (--container takes a container ID or a unique prefix of one, as tables show)
  audit          judge every allocation against what the node can observe; --fix releases
                 what is provably stale and nothing else
  journal        pending and set-aside missed-delete intents, and the last reconcile
  plugins        sockets in the plugins directory: registered, refused and retrying plugins
                 (runtime adapters), with what each reported and released
  podman-events  run the podman adapter: follow podman's container events and serve them
                 to the agent through a socket in its plugins directory (--help for flags)
  nodes          nodes sharing the store (--store etcd): alive or not, blocks, allocations
  node forget N  free the blocks and allocations of node N, gone for good (refused while alive)
  install        install --cni-bin-dir DIR [--link] [--from DIST]: the native forwarder as
                 DIR/warren, and beside it DIR/warren.d/ (this Node and the TypeScript plugin),
                 each file atomically, the forwarder last; --link symlinks this Node instead of
                 copying it (development only: a node of the cluster has no Node.js); --from
                 names the build output (default: this repository's dist/, npm run build)
  doctor         check the node end to end (plugin installed where the runtime looks, configs
                 naming warren against the agent, socket, journal dir, netns dirs, containerd,
                 store, clock) and say how to fix each finding; exit 1 on any error
                 (--help for flags)
  version        print the version

common flags:
  --socket PATH  agent socket (env WARREN_SOCKET)
  --json         machine-readable output

agent flags:
${settingsHelp(Object.values(SETTINGS))}
`;

export interface CliIO {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  readonly env: NodeJS.ProcessEnv;
}


export async function runCli(argv: readonly string[], io: CliIO): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'agent': {
        const { runAgent } = await import('./agent-command.ts');
        return await runAgent(rest, io);
      }
      case 'status':
        return await status(rest, io);
      case 'pools':
        return await pools(rest, io);
      case 'allocations':
        return await allocations(rest, io);
      case 'release':
        return await release(rest, io);
      case 'audit':
        return await auditCommand(rest, io);
      case 'journal':
        return await journalCommand(rest, io);
      case 'plugins':
        return await pluginsCommand(rest, io);
      case 'podman-events':
        return await runPodmanEvents(rest, io, pluginsDirOfAgent(io.env));
      case 'nodes':
        return await nodes(rest, io);
      case 'node': {
        const [verb, ...more] = rest;
        if (verb !== 'forget') throw new UsageError(verb === undefined ? 'node needs a verb: node forget NAME' : `unknown node verb "${verb}"; node forget NAME`);
        return await forgetNode(more, io);
      }
      case 'install': {
        const { runInstall } = await import('./install.ts');
        return await runInstall(rest, io);
      }
      case 'doctor': {
        const { runDoctor } = await import('./doctor/doctor-command.ts');
        return await runDoctor(rest, io, { socketOf: (flag) => clientSocket(flag, io.env) });
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
      io.err(`warren: ${printable(messageOf(error))}\n\n${USAGE}`);
      return 2;
    }
    // The agent's messages quote what it was given and what it recorded. The code is the one
    // the agent answered (or the client's own: AGENT_UNREACHABLE), stable for scripts to match.
    io.err(`warren: ${isWarrenError(error) ? `${error.code}: ` : ''}${printable(messageOf(error))}\n`);
    if (isWarrenError(error, 'AGENT_UNREACHABLE')) io.err('is the agent running? start it with `warren agent`\n');
    return 1;
  }
}

/**
 * The socket the agent listens on, by the agent's own rule; the state directory of a non-root
 * agent is looked for (WARREN_STATE_DIR, else where the agent would have made it), never created.
 */
function clientSocket(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  const uid = process.getuid?.() ?? 0;
  const cwd = process.cwd();
  return agentSocket(flag, { uid, env, cwd, stateDir: () => givenSetting('stateDir', {}, env) ?? findStateDir(env, uid, cwd) });
}

/** Where the agent's plugin registry looks, by the agent's own rule (WARREN_PLUGINS_DIR, else beside its socket). */
function pluginsDirOfAgent(env: NodeJS.ProcessEnv): string | undefined {
  return pluginsDirOf(givenSetting('pluginsDir', {}, env), clientSocket(undefined, env), process.cwd()).pluginsDir;
}

/** The agent behind --socket (or its default); a command waits at most 30 s for an answer. */
function client(flag: string | undefined, env: NodeJS.ProcessEnv): ApiClient {
  return new ApiClient({ socket: clientSocket(flag, env), timeoutMs: 30_000 });
}

const COMMON = { socket: { type: 'string' }, json: { type: 'boolean', default: false } } as const;

/** The config manager's lines of `warren status`: the primary, Warren's file, the last write, any problem. */
function cniConfigLines(c: CniConfigStatus): string[] {
  return [
    safe`cni config:  ${c.state}: ${c.output} from ${c.primary ?? 'no primary'}${c.network === undefined ? '' : ` (network ${c.network})`}, cniVersion at most ${c.cniVersionMax}`,
    c.lastWrite === undefined ? safe`last write:  none by this agent (${c.writes} writes)` : safe`last write:  ${c.lastWrite.at} from ${c.lastWrite.from} (primary sha256 ${c.lastWrite.sha256.slice(0, 12)}, ${c.writes} writes)`,
    ...(c.problem === undefined ? [] : [safe`cni problem: ${c.problem}`]),
    ...(c.shadowedBy === undefined ? [] : [safe`cni problem: ${c.shadowedBy} sorts before Warren's file: the runtime uses it, not Warren's`]),
    ...(c.readinessIndicator === undefined ? [] : [safe`readiness:   ${c.readinessIndicator.path} ${c.readinessIndicator.present ? 'present' : 'MISSING'}`]),
    ...(c.notes ?? []).map((n) => safe`cni note:    ${n}`),
  ];
}

async function status(argv: readonly string[], io: CliIO): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: COMMON, strict: true });
  const s = await client(values.socket, io.env).status();
  if (values.json) {
    io.out(`${JSON.stringify(s, null, 2)}\n`);
    return 0;
  }
  io.out(
    [
      safe`node:        ${s.node}`,
      safe`agent:       pid ${s.pid}, version ${s.version}, up ${s.uptimeSeconds}s (since ${s.startedAt})`,
      safe`socket:      ${s.socket}`,
      safe`store:       ${s.store.description} (${s.store.healthy ? 'healthy' : `UNHEALTHY: ${s.store.error}`})`,
      s.ready ? 'ready:       yes' : safe`ready:       no (${s.notReady ?? 'see store'})`,
      safe`pools:       ${s.pools}`,
      safe`allocations: ${s.allocations}`,
      safe`journal:     ${s.reconciler.journalDir}: ${s.reconciler.pending.length} pending, ${s.reconciler.rejected.length} set aside, ${s.reconciler.releasedFromJournal} released since start`,
      `reconcile:   ${reconcileLine(s.reconciler.lastReconcile)}`,
      ...(s.containerd === undefined
        ? []
        : [
            safe`containerd:  ${s.containerd.state} since ${s.containerd.since} (${s.containerd.socket}, namespaces ${s.containerd.namespaces.join(', ')}); ${s.containerd.events} events, ${s.containerd.malformed} malformed, ${s.containerd.releases.released} addresses released`,
            ...(s.containerd.releases.exited.length > 0 ? [`exited:      ${s.containerd.releases.exited.map((e) => safe`${e.containerID.slice(0, 16)} (waiting for ${e.waitingFor})`).join('; ')}`] : []),
            ...(s.containerd.lastError === undefined ? [] : [safe`containerd error: ${s.containerd.lastError}`]),
          ]),
      ...(s.kubernetes === undefined
        ? []
        : [
            safe`kubernetes:  pods ${s.kubernetes.pods.state} since ${s.kubernetes.pods.since} (${s.kubernetes.pods.relists} relists, ${s.kubernetes.pods.reconnects} reconnects); ${s.kubernetes.releases.released} addresses released, ${s.kubernetes.releases.waiting.length} pods waiting, ${s.kubernetes.events.sent} events sent`,
            ...(s.kubernetes.pods.lastError === undefined ? [] : [safe`kubernetes error: ${s.kubernetes.pods.lastError}`]),
            ...(s.kubernetes.forbidden.length === 0 ? [] : [safe`kubernetes:  FORBIDDEN: the service account may not ${s.kubernetes.forbidden.join('; ')}`]),
            ...(s.kubernetes.nodes === undefined ? [] : [safe`nodes:       ${s.kubernetes.nodes.state}; gone ${s.kubernetes.nodes.gone.join(', ') || 'none'}; forgotten here ${s.kubernetes.nodes.forgotten.join(', ') || 'none'}`]),
          ]),
      ...(s.cniConfig === undefined ? [] : cniConfigLines(s.cniConfig)),
      ...(s.plugins === undefined ? [] : [safe`plugins:     ${s.plugins.registered} registered, ${s.plugins.refused} refused, ${s.plugins.retrying} retrying (warren plugins)`]),
      ...(s.metrics === undefined
        ? []
        : [s.metrics.error === undefined ? safe`metrics:     http://${s.metrics.address}/metrics, dashboard http://${s.metrics.address}/` : safe`metrics:     NOT SERVED: ${s.metrics.error}`]),
      ...(s.cluster === undefined
        ? []
        : [safe`cluster:     ${s.cluster.liveNodes.length} nodes alive (${s.cluster.liveNodes.join(', ')}); this node ${s.cluster.thisNodeAnnounced ? 'announced' : 'NOT announced yet'}, holding ${s.cluster.ownBlocks} blocks`]),
      ...s.reconciler.recentErrors.slice(-5).map((e) => safe`error:       ${e.at} ${e.message}`),
    ].join('\n') + '\n',
  );
  return s.ready ? 0 : 1;
}

async function pools(argv: readonly string[], io: CliIO): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: COMMON, strict: true });
  const list = await client(values.socket, io.env).pools();
  if (values.json) {
    io.out(`${JSON.stringify(list, null, 2)}\n`);
    return 0;
  }
  if (list.length === 0) {
    io.out('no pools yet: a pool appears with its first allocation\n');
    return 0;
  }
  io.out(
    table(
      ['POOL', 'SPAN', 'CAPACITY', 'ALLOCATED', 'RESTING', 'USED', 'NODE'],
      list.map((p) => [
        p.pool,
        p.first === undefined ? '-' : `${p.first}-${p.last}`,
        p.capacity ?? '-',
        String(p.allocated),
        String(p.resting),
        percent(p.utilisation),
        p.node ?? (p.blockPrefix === undefined ? '-' : `${p.blocks ?? 0} blocks of /${p.blockPrefix}`),
      ]),
    ),
  );
  return 0;
}

async function allocations(argv: readonly string[], io: CliIO): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      ...COMMON,
      pool: { type: 'string' },
      network: { type: 'string' },
      container: { type: 'string' },
      ifname: { type: 'string' },
      namespace: { type: 'string' },
      pod: { type: 'string' },
      'pod-uid': { type: 'string' },
      node: { type: 'string' },
      address: { type: 'string' },
    },
    strict: true,
  });
  const query: AllocationQuery = {
    ...(values.pool === undefined ? {} : { pool: values.pool }),
    ...(values.network === undefined ? {} : { network: values.network }),
    ...(values.ifname === undefined ? {} : { ifname: values.ifname }),
    ...(values.namespace === undefined ? {} : { podNamespace: values.namespace }),
    ...(values.pod === undefined ? {} : { podName: values.pod }),
    ...(values['pod-uid'] === undefined ? {} : { podUID: values['pod-uid'] }),
    ...(values.node === undefined ? {} : { node: values.node }),
    ...(values.address === undefined ? {} : { address: values.address }),
  };
  let list = await client(values.socket, io.env).allocations(query);
  if (values.container !== undefined) {
    // Resolved among what the other filters select: one request, and a prefix need only be
    // unique there.
    const id = resolveContainer(list, values.container);
    list = list.filter((a) => a.containerID === id);
  }
  if (values.json) {
    io.out(`${JSON.stringify(list, null, 2)}\n`);
    return 0;
  }
  if (list.length === 0) {
    io.out('no allocations\n');
    return 0;
  }
  const now = Date.now();
  io.out(
    table(
      ['ADDRESS', 'POOL', 'NETWORK', 'CONTAINER', 'IF', 'POD', 'NODE', 'AGE'],
      list.map((a) => [
        a.address,
        a.pool,
        a.network,
        a.containerID.length > 16 ? a.containerID.slice(0, 16) : a.containerID,
        a.ifname,
        a.podName === undefined ? '-' : a.podNamespace === undefined ? a.podName : `${a.podNamespace}/${a.podName}`,
        a.node,
        age(a.createdAt, now),
      ]),
    ),
  );
  return 0;
}

async function release(argv: readonly string[], io: CliIO): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: { ...COMMON, pool: { type: 'string' }, address: { type: 'string' }, container: { type: 'string' }, network: { type: 'string' }, ifname: { type: 'string' } },
    strict: true,
  });
  const agent = client(values.socket, io.env);
  let request: ReleaseRequest;
  if (values.address !== undefined) {
    if (values.container !== undefined) throw new UsageError('release takes --address or --container, not both');
    request = { address: values.address, ...(values.pool === undefined ? {} : { pool: values.pool }) };
  } else if (values.container !== undefined) {
    const scope = { ...(values.network === undefined ? {} : { network: values.network }), ...(values.ifname === undefined ? {} : { ifname: values.ifname }) };
    request = { containerID: resolveContainer(await agent.allocations(scope), values.container), ...scope };
  } else {
    throw new UsageError('release needs --address or --container');
  }
  const result = await agent.release(request);
  if (values.json) {
    io.out(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  }
  if (result.released.length === 0) io.out('nothing to release: no matching allocation\n');
  for (const a of result.released) io.out(safe`released ${a.address} from ${a.pool} (container ${a.containerID}, ${a.ifname})\n`);
  return 0;
}

/**
 * The container a --container value names among `allocations`: the ID itself when one has it,
 * else the one ID it begins, as podman and docker take a unique prefix (the tables show 16
 * characters). A prefix of several IDs is refused with the IDs listed; a value that begins none
 * comes back as it is, to match nothing.
 */
function resolveContainer(allocations: readonly Allocation[], given: string): string {
  const ids = [...new Set(allocations.map((a) => a.containerID))];
  if (given === '' || ids.includes(given)) return given;
  const matches = ids.filter((id) => id.startsWith(given)).sort();
  if (matches.length > 1) {
    throw new WarrenError('BAD_REQUEST', `container "${given}" is the beginning of ${matches.length} container IDs; give more of it: ${matches.join(', ')}`);
  }
  return matches[0] ?? given;
}

async function nodes(argv: readonly string[], io: CliIO): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: COMMON, strict: true });
  const list = await client(values.socket, io.env).nodes();
  if (values.json) {
    io.out(`${JSON.stringify(list, null, 2)}\n`);
    return 0;
  }
  if (list.length === 0) {
    io.out('no nodes\n');
    return 0;
  }
  io.out(
    table(
      ['NODE', 'ALIVE', 'SINCE', 'ALLOCATIONS', 'BLOCKS'],
      list.map((n) => [n.node, n.alive ? 'yes' : 'no', n.since ?? '-', String(n.allocations), n.blocks.length === 0 ? '-' : n.blocks.map((b) => blockCidrOfKey(b) ?? b).join(' ')]),
    ),
  );
  return 0;
}

async function forgetNode(argv: readonly string[], io: CliIO): Promise<number> {
  const { values, positionals } = parseArgs({ args: [...argv], options: COMMON, strict: true, allowPositionals: true });
  if (positionals.length !== 1) throw new UsageError('node forget takes exactly one node name');
  const node = positionals[0] as string;
  const result = await client(values.socket, io.env).forgetNode({ node });
  if (values.json) {
    io.out(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  }
  io.out(safe`forgot node ${result.node}: released ${result.released.length} allocations, gave back ${result.blocks.length} blocks\n`);
  for (const a of result.released) io.out(safe`released ${a.address} (container ${a.containerID}, ${a.ifname})\n`);
  return 0;
}

function reconcileLine(r: ReconcileReport | undefined): string {
  if (r === undefined) return 'not yet';
  const parts = [safe`${r.at}: released ${r.journalReleased} from the journal, ${r.netnsReleased} with their namespace gone`];
  if (r.journalFailed > 0) parts.push(`${r.journalFailed} failed`);
  if (r.unobservable.length > 0) parts.push(`could not observe: ${r.unobservable.map(printable).join('; ')}`);
  return parts.join('; ');
}

async function auditCommand(argv: readonly string[], io: CliIO): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: { ...COMMON, fix: { type: 'boolean', default: false } }, strict: true });
  const report = await client(values.socket, io.env).audit({ fix: values.fix });
  if (values.json) {
    io.out(`${JSON.stringify(report, null, 2)}\n`);
    return 0;
  }
  const lines = [safe`audit at ${report.at}: ${report.counts.healthy} healthy, ${report.counts.stale} stale, ${report.counts.suspect} suspect`];
  lines.push(safe`journal ${report.sources.journal.dir}: ${report.sources.journal.pending} pending`);
  for (const d of report.sources.netns) lines.push(d.observable ? safe`netns ${d.dir}: observable` : safe`netns ${d.dir}: NOT observable (${d.reason}); nothing is released on its account`);
  io.out(`${lines.join('\n')}\n`);
  if (report.findings.length > 0) {
    io.out(
      table(
        ['VERDICT', 'ADDRESS', 'POOL', 'CONTAINER', 'IF', 'WHY'],
        report.findings.map((f) => [
          f.verdict.kind === 'suspect' ? `suspect (${f.verdict.why})` : f.verdict.kind,
          f.allocation.address,
          f.allocation.pool,
          f.allocation.containerID.length > 16 ? f.allocation.containerID.slice(0, 16) : f.allocation.containerID,
          f.allocation.ifname,
          f.verdict.reason,
        ]),
      ),
    );
  }
  if (values.fix) {
    io.out(`released ${report.released?.length ?? 0} stale allocation(s)${(report.released ?? []).map((a) => safe`\n  ${a.address} (${a.containerID})`).join('')}\n`);
    for (const e of report.errors ?? []) io.err(safe`could not release ${e}\n`);
    return (report.errors ?? []).length > 0 ? 1 : 0;
  }
  if (report.counts.stale > 0) io.out('run `warren audit --fix` to release the stale ones\n');
  return 0;
}

async function journalCommand(argv: readonly string[], io: CliIO): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: COMMON, strict: true });
  const s = await client(values.socket, io.env).journal();
  if (values.json) {
    io.out(`${JSON.stringify(s, null, 2)}\n`);
    return 0;
  }
  io.out(safe`journal ${s.journalDir}: ${s.pending.length} pending, ${s.releasedFromJournal} released since start\n`);
  if (s.pending.length > 0) {
    io.out(table(['FILE', 'NETWORK', 'CONTAINER', 'IF', 'FAILURES', 'NEXT TRY', 'LAST ERROR'], s.pending.map((p) => [p.name, p.network, p.containerID, p.ifname, String(p.failures), p.nextAttemptAt ?? 'now', p.lastError ?? '-'])));
  }
  if (s.rejected.length > 0) {
    io.out(safe`set aside in ${s.journalDir}/rejected (recent):\n`);
    io.out(table(['FILE', 'REASON'], s.rejected.map((r) => [r.name, r.reason])));
  }
  io.out(`last reconcile: ${reconcileLine(s.lastReconcile)}\n`);
  return 0;
}

async function pluginsCommand(argv: readonly string[], io: CliIO): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: COMMON, strict: true });
  const s = await client(values.socket, io.env).plugins();
  if (values.json) {
    io.out(`${JSON.stringify(s, null, 2)}\n`);
    return 0;
  }
  io.out(safe`plugins ${s.dir} (${s.watcher}): ${s.registered} registered, ${s.refused} refused, ${s.retrying} retrying\n`);
  if (s.plugins.length > 0) {
    io.out(table(['SOCKET', 'STATE', 'TYPE', 'NAME', 'VERSION', 'SINCE', 'DETAIL'], s.plugins.map((p) => [p.socket, p.state, p.type ?? '-', p.name ?? '-', p.version ?? '-', p.since, pluginDetail(p)])));
  }
  return 0;
}

/** The one cell that says most about a plugin: why it is refused or failing, or what its stream did. */
function pluginDetail(p: PluginEntry): string {
  if (p.error !== undefined) return `${p.failures > 0 ? `${p.failures} failures, ` : ''}${p.retryAt === undefined ? '' : `next ${p.retryAt}: `}${p.error}`;
  const stream = p.detail?.stream as { state?: unknown; events?: unknown; malformed?: unknown } | undefined;
  const released = p.detail?.released;
  if (stream === undefined) return '-';
  return `${String(stream.state)}; ${String(stream.events)} events, ${String(stream.malformed)} malformed, ${String(released ?? 0)} addresses released`;
}
