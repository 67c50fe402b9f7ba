/** `warren status`, `warren journal` and `warren plugins`: what the agent reports of itself, as text or --json. */
import { parseArgs } from 'node:util';
import { WarrenError, isWarrenError, messageOf } from '../core/errors.ts';
import type {
  ClusterStatus,
  CniConfigStatus,
  FileCheckStatus,
  IpamClaimsReport,
  PluginEntry,
  ReconcileReport,
  ReconcilerStatus,
} from '../api/status.ts';
import { REJECTED_DIR } from '../sources/missed-delete-journal.ts';
import { COMMON, type CliContext } from './context.ts';
import { type OfflineJournal, readJournalOffline } from './journal-offline.ts';
import { requestRateLines } from './request-rate-lines.ts';
import { jsonText, printable, safe, table } from './format.ts';
import type { CliIO } from './io.ts';

/** The config manager's lines of `warren status`: the primary, Warren's file, the last write, any problem. */
function cniConfigLines(c: CniConfigStatus): string[] {
  if (c.state === 'beside-multus') {
    return [
      safe`cni config:  beside Multus: ${c.primary ?? 'its config'} is the node's primary; Multus attaches each ` +
        "network from its own config (Warren's in NetworkAttachmentDefinitions), so nothing is written here",
    ];
  }
  return [
    safe`cni config:  ${c.state}: ${c.output} from ` +
      safe`${c.primary ?? 'no primary'}${c.network === undefined ? '' : ` (network ${c.network})`}, cniVersion ` +
      safe`at most ${c.cniVersionMax}`,
    c.lastWrite === undefined
      ? safe`last write:  none by this agent (${c.writes} writes)`
      : safe`last write:  ${c.lastWrite.at} from ${c.lastWrite.from} (primary sha256 ` +
        safe`${c.lastWrite.sha256.slice(0, 12)}, ${c.writes} writes)`,
    ...(c.problem === undefined ? [] : [safe`cni problem: ${c.problem}`]),
    ...(c.shadowedBy === undefined
      ? []
      : [safe`cni problem: ${c.shadowedBy} sorts before Warren's file: the runtime uses it, not Warren's`]),
    ...(c.readinessIndicator === undefined
      ? []
      : [safe`readiness:   ${c.readinessIndicator.path} ${c.readinessIndicator.present ? 'present' : 'MISSING'}`]),
    ...(c.notes ?? []).map((n) => safe`cni note:    ${n}`),
    ...(c.takeover ?? []).flatMap((t) => [
      safe`cni takeover: network ${t.network} from host-local's ${t.dataDir}: ` +
        safe`${t.handedBack === true ? 'handed back' : t.imported ? 'reservations imported' : 'IMPORTING (ADD waits)'}`,
      ...(t.problems ?? []).map((p) => safe`cni takeover: ${p}`),
    ]),
  ];
}

export async function statusCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: COMMON, strict: true });
  const s = await context.client(values.socket).status();
  if (values.json) {
    io.out(jsonText(s));
    return 0;
  }
  io.out(
    `${[
      safe`node:        ${s.node}`,
      safe`agent:       pid ${s.pid}, version ${s.version}, up ${s.uptimeSeconds}s (since ${s.startedAt})`,
      safe`socket:      ${s.socket}`,
      safe`store:       ${s.store.description} (${s.store.healthy ? 'healthy' : `UNHEALTHY: ${s.store.error}`})`,
      s.ready ? 'ready:       yes' : safe`ready:       no (${s.notReady ?? 'see store'})`,
      safe`pools:       ${s.pools}`,
      safe`allocations: ${s.allocations}`,
      safe`journal:     ${s.reconciler.journalDir}: ${s.reconciler.pending.length} pending, ` +
        safe`${s.reconciler.rejected.length} set aside, ${s.reconciler.releasedFromJournal} released since ` +
        safe`start`,
      `reconcile:   ${reconcileLine(s.reconciler.lastReconcile)}`,
      ...(s.containerd === undefined
        ? []
        : [
            safe`containerd:  ${s.containerd.state} since ${s.containerd.since} (${s.containerd.socket}, ` +
              safe`namespaces ${s.containerd.namespaces.join(', ')}); ${s.containerd.events} events, ` +
              safe`${s.containerd.malformed} malformed, ${s.containerd.releases.released} addresses released`,
            ...(s.containerd.releases.exited.length > 0
              ? [
                  `exited:      ` +
                    `${s.containerd.releases.exited
                      .map((e) => safe`${e.containerID.slice(0, 16)} (waiting for ${e.waitingFor})`)
                      .join('; ')}`,
                ]
              : []),
            ...(s.containerd.lastError === undefined ? [] : [safe`containerd error: ${s.containerd.lastError}`]),
          ]),
      ...(s.kubernetes === undefined
        ? []
        : [
            safe`kubernetes:  pods ${s.kubernetes.pods.state} since ${s.kubernetes.pods.since} ` +
              safe`(${s.kubernetes.pods.relists} relists, ${s.kubernetes.pods.reconnects} reconnects); ` +
              safe`${s.kubernetes.releases.released} addresses released, ` +
              safe`${s.kubernetes.releases.waiting.length} pods waiting, ${s.kubernetes.events.sent} events ` +
              safe`sent`,
            ...(s.kubernetes.pods.lastError === undefined
              ? []
              : [safe`kubernetes error: ${s.kubernetes.pods.lastError}`]),
            ...(s.kubernetes.forbidden.length === 0
              ? []
              : [safe`kubernetes:  FORBIDDEN: the service account may not ${s.kubernetes.forbidden.join('; ')}`]),
            ...(s.kubernetes.ipamClaims === undefined ? [] : [ipamClaimsLine(s.kubernetes.ipamClaims)]),
            ...(s.kubernetes.nodes === undefined
              ? []
              : [
                  safe`nodes:       ${s.kubernetes.nodes.watcher ? s.kubernetes.nodes.state : 'watched elsewhere'}` +
                    safe`; gone ${s.kubernetes.nodes.gone.join(', ') || 'none'}; forgotten here ` +
                    safe`${s.kubernetes.nodes.forgotten.join(', ') || 'none'}`,
                ]),
          ]),
      ...(s.cniConfig === undefined ? [] : cniConfigLines(s.cniConfig)),
      ...(s.plugins === undefined
        ? []
        : [
            safe`plugins:     ${s.plugins.registered} registered, ${s.plugins.refused} refused, ` +
              safe`${s.plugins.retrying} retrying (warren plugins)`,
          ]),
      ...(s.metrics === undefined
        ? []
        : [
            s.metrics.error === undefined
              ? safe`metrics:     http://${s.metrics.address}/metrics, dashboard http://${s.metrics.address}/`
              : safe`metrics:     NOT SERVED: ${s.metrics.error}`,
          ]),
      ...requestRateLines(s),
      ...(s.cluster === undefined ? [] : clusterLines(s.cluster)),
      ...s.reconciler.recentErrors.slice(-5).map((e) => safe`error:       ${e.at} ${e.message}`),
    ].join('\n')}\n`,
  );
  return s.ready ? 0 : 1;
}

/** The cluster's lines of `warren status`; what could not be read now is said, and what is shown then is dated. */
function clusterLines(c: ClusterStatus): string[] {
  const alive = safe`${c.liveNodes.length} nodes alive (${c.liveNodes.join(', ')})`;
  const lines =
    c.unread === undefined
      ? [
          safe`cluster:     ${alive}; this node ${c.thisNodeAnnounced ? 'announced' : 'NOT announced yet'}, ` +
            safe`holding ${c.ownBlocks} blocks`,
        ]
      : [
          safe`cluster:     NOT READ NOW: ${c.unread}`,
          c.liveNodesReadAt === undefined
            ? safe`cluster:     live nodes never read since the agent started; this node holding ${c.ownBlocks} blocks`
            : safe`cluster:     as last read at ${c.liveNodesReadAt}: ${alive}; this node ` +
              safe`${c.thisNodeAnnounced ? 'announced' : 'NOT announced'}, holding ${c.ownBlocks} blocks`,
        ];
  return [
    ...lines,
    ...(c.problem === undefined ? [] : [safe`cluster:     NOT ALLOCATING: ${c.problem}`]),
    ...fileCheckLines(c.fileCheck),
  ];
}

/** What comparing this node's file with what it published found, when there is something to say. */
function fileCheckLines(f: FileCheckStatus | undefined): string[] {
  if (f === undefined) return [];
  if (!f.compared)
    return [
      safe`file:        NOT COMPARED with what this node published yet (no ADD in its blocks): ${f.problem ?? ''}`,
    ];
  const lines: string[] = [];
  if (f.restored > 0)
    lines.push(
      safe`file:        ${f.restored} allocations held from what this node published (its file had lost them: ` +
        safe`restored from an older copy, or deleted), until their containers are proven gone (DEL, journal, ` +
        safe`runtime, pod gone, GC); blocks ${f.merged.join(', ')}` +
        (f.adopted.length === 0 ? '' : safe`; adopted ${f.adopted.join(', ')}`),
    );
  const announced = `${f.announced ?? 0} announced addresses held (no container named): warren store accept`;
  if ((f.announced ?? 0) > 0) lines.push(safe`file:        ${announced}`);
  for (const d of f.disagreements) lines.push(safe`file:        DISAGREES with what it published: ${d}`);
  for (const w of f.withheld)
    lines.push(safe`file:        NOT ALLOCATING in block ${w} (warren store accept, once checked)`);
  return lines;
}

function reconcileLine(r: ReconcileReport | undefined): string {
  if (r === undefined) return 'not yet';
  const parts = [
    safe`${r.at}: released ${r.journalReleased} from the journal, ${r.netnsReleased} with their namespace gone`,
  ];
  if (r.journalFailed > 0) parts.push(`${r.journalFailed} failed`);
  if (r.unobservable.length > 0) parts.push(`could not observe: ${r.unobservable.map(printable).join('; ')}`);
  return parts.join('; ');
}

export async function journalCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: { ...COMMON, 'journal-dir': { type: 'string' } },
    strict: true,
  });
  let s: ReconcilerStatus;
  try {
    s = await context.client(values.socket).journal();
  } catch (error) {
    if (!isWarrenError(error, 'AGENT_UNREACHABLE')) throw error;
    return journalWithoutAgent(context.journalDir(values['journal-dir']), values.json, messageOf(error), io);
  }
  if (values.json) {
    io.out(jsonText(s));
    return 0;
  }
  const unread = s.unread;
  const waiting = unread.length === 0 ? '' : `, ${unread.length} not read yet`;
  io.out(
    safe`journal ${s.journalDir}: ${s.pending.length} pending${waiting}, ${s.releasedFromJournal} released ` +
      safe`since start\n`,
  );
  if (s.pending.length > 0) {
    io.out(
      table(
        ['FILE', 'NETWORK', 'CONTAINER', 'IF', 'FAILURES', 'NEXT TRY', 'LAST ERROR'],
        s.pending.map((p) => [
          p.name,
          p.network,
          p.containerID,
          p.ifname,
          String(p.failures),
          p.nextAttemptAt ?? 'now',
          p.lastError ?? '-',
        ]),
      ),
    );
  }
  if (unread.length > 0) {
    io.out(
      `${unread.length === 1 ? '1 file' : `${unread.length} files`} the agent has not read yet; it reads ` +
        `${unread.length === 1 ? 'it' : 'them'} again on its next pass:\n`,
    );
    io.out(
      table(
        ['FILE', 'LAST ERROR'],
        unread.map((u) => [u.name, u.error]),
      ),
    );
  }
  if (s.rejected.length > 0) {
    io.out(safe`set aside in ${s.journalDir}/rejected (recent):\n`);
    io.out(
      table(
        ['FILE', 'REASON'],
        s.rejected.map((r) => [r.name, r.reason]),
      ),
    );
  }
  io.out(`last reconcile: ${reconcileLine(s.lastReconcile)}\n`);
  return 0;
}

export async function pluginsCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: COMMON, strict: true });
  const s = await context.client(values.socket).plugins();
  if (values.json) {
    io.out(jsonText(s));
    return 0;
  }
  io.out(
    safe`plugins ${s.dir} (${s.watcher}): ${s.registered} registered, ${s.refused} refused, ${s.retrying} retrying\n`,
  );
  if (s.problem !== undefined) io.out(safe`not trusted, nothing registers: ${s.problem}\n`);
  if (s.plugins.length > 0) {
    io.out(
      table(
        ['SOCKET', 'STATE', 'TYPE', 'NAME', 'VERSION', 'SINCE', 'DETAIL'],
        s.plugins.map((p) => [
          p.socket,
          p.state,
          p.type ?? '-',
          p.name ?? '-',
          p.version ?? '-',
          p.since,
          pluginDetail(p),
        ]),
      ),
    );
  }
  return 0;
}

/** The one cell that says most about a plugin: why it is refused or failing, or what its stream did. */
function pluginDetail(p: PluginEntry): string {
  if (p.error !== undefined)
    return `${p.failures > 0 ? `${p.failures} failures, ` : ''}${
      p.retryAt === undefined ? '' : `next ${p.retryAt}: `
    }${p.error}`;
  const stream = p.detail?.stream as { state?: unknown; events?: unknown; malformed?: unknown } | undefined;
  const released = p.detail?.released;
  if (stream === undefined) return '-';
  return (
    `${String(stream.state)}; ${String(stream.events)} events, ${String(stream.malformed)} malformed, ` +
    `${String(released ?? 0)} addresses released`
  );
}

/**
 * `warren journal` with no agent answering: the directory read by the command itself (read-only,
 * journal-offline.ts), so what waits is shown exactly when nothing releases it.
 */
function journalWithoutAgent(dir: string | undefined, json: boolean, why: string, io: CliIO): number {
  if (dir === undefined) throw new WarrenError('AGENT_UNREACHABLE', `${why}; and no journal directory is set`);
  let j: OfflineJournal;
  try {
    j = readJournalOffline(dir);
  } catch (error) {
    throw new WarrenError('AGENT_UNREACHABLE', `${why}; and the journal ${dir} cannot be read: ${messageOf(error)}`);
  }
  if (json) {
    io.out(jsonText({ agent: 'unreachable', ...j }));
    return 0;
  }
  io.err(safe`warren: the agent is not answering (${why}); read ${dir} directly\n`);
  const left = j.notListed === 0 ? '' : ` (${j.notListed} more not read)`;
  io.out(safe`journal ${dir}: ${j.pending.length} waiting for the agent${left}; nothing is released until it runs\n`);
  if (j.pending.length > 0) {
    io.out(
      table(
        ['FILE', 'NETWORK', 'CONTAINER', 'IF', 'RECORDED', 'WHY JOURNALED'],
        j.pending.map((p) => [p.name, p.network, p.containerID, p.ifname, p.recordedAt, p.reason]),
      ),
    );
  }
  if (j.unreadable.length > 0) {
    io.out('the agent will set these aside, never releasing on them:\n');
    io.out(
      table(
        ['FILE', 'WHY'],
        j.unreadable.map((u) => [u.name, u.reason]),
      ),
    );
  }
  if (j.rejected.length > 0) io.out(safe`set aside in ${dir}/${REJECTED_DIR}: ${j.rejected.join(', ')}\n`);
  return 0;
}

/** KubeVirt's IPAMClaims as `warren status` says them: the watch, and what followed from it. */
function ipamClaimsLine(c: IpamClaimsReport): string {
  const watch =
    c.served === false
      ? 'not served (no IPAMClaim CRD)'
      : safe`${c.watch.state}, ${c.cache.claims} claims${c.cache.listed ? '' : ' (not listed yet)'}`;
  const problems = [c.statusWrites.lastError, c.upkeep.lastError].filter((e): e is string => e !== undefined);
  return (
    safe`ipamclaims:  ${watch}; ${c.statusWrites.written} statuses written, ${c.upkeep.ended} holdings ended` +
    (problems.length === 0 ? '' : safe`; last error: ${problems.join('; ')}`)
  );
}
