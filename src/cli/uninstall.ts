/**
 * `warren uninstall`: hands the node back to its primary IPAM and takes Warren off it, in the
 * order in which no pod start gets a duplicate or a permanent failure (agent/node/hand-back.ts):
 * the agent refuses ADD, writes host-local's reservations for every address it holds and removes
 * Warren's config; only then does this remove the plugin from the CNI bin dir (a runtime no longer
 * calls it once the config is gone). The agent removes its database and journal when it stops.
 * Refuses, removing nothing, when the agent cannot be reached: without it, nobody could write the
 * reservations, and removing the config alone would let the primary hand out Warren's addresses.
 */
import { parseArgs } from 'node:util';
import { COMMON, client } from './agent-client.ts';
import { jsonText, safe } from './format.ts';
import { uninstallPlugin } from './install.ts';
import type { CliIO } from './main.ts';

const FLAGS = { ...COMMON, 'cni-bin-dir': { type: 'string' } } as const;

export async function uninstallCommand(argv: readonly string[], io: CliIO): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: FLAGS, strict: true, allowPositionals: false });
  const report = await client(values.socket, io.env).uninstall();
  const binDir = values['cni-bin-dir'];
  const removed = binDir === undefined || binDir === '' ? [] : uninstallPlugin(binDir);
  if (values.json) {
    io.out(jsonText({ ...report, pluginRemoved: removed }));
    return 0;
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
      ? 'cni config:  not managed by this agent'
      : report.configRemoved
        ? safe`cni config:  removed ${report.output}`
        : safe`cni config:  ${report.output} was not Warren's (left alone)`,
    ...(binDir === undefined
      ? ['plugin:      left in place (pass --cni-bin-dir DIR to remove it)']
      : removed.map((p) => safe`plugin:      removed ${p}`)),
    'state:       the agent removes its database and journal when it stops',
  ];
  io.out(`${lines.join('\n')}\n`);
  return 0;
}
