/**
 * `warren reservations`: the cluster-wide reservations (WarrenReservation) as the agent watches
 * them — what each holds back, the ranges of its store it falls in (and whether it holds a whole
 * range back), and where reserved addresses are still in use (each node's entry of the status).
 */
import { parseArgs } from 'node:util';
import { COMMON, type CliContext } from './context.ts';
import { table } from './format.ts';
import type { CliIO } from './io.ts';

export async function reservationsCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: COMMON, strict: true });
  const report = await context.client(values.socket).reservations();
  if (values.json) {
    io.out(`${JSON.stringify(report, null, 2)}\n`);
    return 0;
  }
  if (!report.watched) {
    io.out('reservations are not watched: the agent runs without its Kubernetes source (--kubernetes)\n');
    return 0;
  }
  if (report.reservations.length === 0) {
    io.out('no reservations\n');
    return 0;
  }
  io.out(
    table(
      ['RESERVATION', 'ADDRESSES', 'COVERS', 'IN USE', 'REASON'],
      report.reservations.map((r) => [
        r.name,
        [...r.addresses.filter((a) => !r.malformed.includes(a)), ...r.malformed.map((m) => `${m} (ignored)`)].join(
          ', ',
        ),
        r.covers.length === 0
          ? '-'
          : r.covers
              .map((c) => `${c.subnet}: ${c.whole ? 'all' : c.reserved}${c.pool === c.subnet ? '' : ` (${c.pool})`}`)
              .join(', '),
        r.inUse.length === 0
          ? '-'
          : r.inUse
              .map((n) => {
                const listed = n.addresses.map((a) => (a.pod === undefined ? a.address : `${a.address} ${a.pod}`));
                const more = n.count > n.addresses.length ? ` and ${n.count - n.addresses.length} more` : '';
                return `${n.node}: ${listed.join(', ')}${more}`;
              })
              .join('; '),
        r.reason ?? '-',
      ]),
    ),
  );
  return 0;
}
