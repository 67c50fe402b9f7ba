/**
 * `warren uninstall`: hands the node back to its primary IPAM and takes Warren off it, in the
 * order in which no pod start gets a duplicate or a permanent failure (agent/node/hand-back.ts):
 * the agent refuses ADD, writes host-local's reservations for every address it holds and removes
 * Warren's config; only then does this remove the plugin from the CNI bin dir (a runtime no longer
 * calls it once the config is gone). The agent removes its database and journal when it stops.
 * Refuses, removing nothing, when the agent cannot be reached: without it, nobody could write the
 * reservations, and removing the config alone would let the primary hand out Warren's addresses.
 *
 * With the agent's config manager off (beside Multus, under systemd) the configs naming Warren are
 * the operator's and stay: while pods still hold addresses through Warren, their DELs call the
 * plugin, and without it they would fail for good (pods stuck terminating). So the plugin is then
 * kept, the command says why and exits PLUGIN_KEPT; run again once those pods are gone, it removes it.
 */
import { parseArgs } from 'node:util';
import { defined } from '../core/defined.ts';
import { COMMON, type CliContext } from './context.ts';
import { jsonText, safe } from './format.ts';
import { uninstallPlugin } from './install.ts';
import type { CliIO } from './io.ts';

const FLAGS = { ...COMMON, 'cni-bin-dir': { type: 'string' } } as const;

/** The exit code when the node was handed back but the plugin stays for the pods still using it. */
export const PLUGIN_KEPT = 3;

export async function uninstallCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: FLAGS, strict: true, allowPositionals: false });
  const report = await context.client(values.socket).uninstall();
  const binDir = values['cni-bin-dir'];
  // Without a config of the agent's own, the configs naming Warren stay: their pods' DELs need it.
  const kept =
    binDir !== undefined && binDir !== '' && report.output === undefined && report.held > 0
      ? `left in place: pods on this node still hold ${report.held} address${report.held === 1 ? '' : 'es'} ` +
        'through Warren, and their DELs call it (the configs naming warren are yours: ' +
        'NetworkAttachmentDefinitions, files); delete those pods, then run `warren uninstall` again'
      : undefined;
  const removed = binDir === undefined || binDir === '' || kept !== undefined ? [] : uninstallPlugin(binDir);
  const code = kept === undefined ? 0 : PLUGIN_KEPT;
  if (values.json) {
    io.out(jsonText({ ...report, pluginRemoved: removed, ...defined({ pluginKept: kept }) }));
    return code;
  }
  const lines = [
    safe`handed back: ${report.at}; ADD is refused from now on (marked in ${report.marker})`,
    ...report.networks.map(
      (n) =>
        safe`network ${n.network}: ${n.written} host-local reservations written, ${n.kept} already there, ` +
        safe`${n.removed} stale removed in ${n.dataDir}`,
    ),
    ...report.networks.flatMap((n) => n.problems.map((p) => safe`problem:     ${p}`)),
    report.output === undefined
      ? 'cni config:  not managed by this agent (the configs naming warren are yours to remove)'
      : report.configRemoved
        ? safe`cni config:  removed ${report.output}`
        : safe`cni config:  ${report.output} was not Warren's (left alone)`,
    ...(binDir === undefined
      ? ['plugin:      left in place (pass --cni-bin-dir DIR to remove it)']
      : kept !== undefined
        ? [safe`plugin:      ${kept}`]
        : removed.map((p) => safe`plugin:      removed ${p}`)),
    'state:       the agent removes its database and journal when it stops',
  ];
  io.out(`${lines.join('\n')}\n`);
  return code;
}
