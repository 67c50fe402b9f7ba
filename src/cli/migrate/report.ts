/**
 * What `warren migrate whereabouts` prints: a table per range (address, pod, node, outcome), the
 * problems met in whereabouts' objects, and a summary; or the same as one JSON document.
 *
 * Guarantees: every recorded string goes through `printable` (format.ts) in the text form; the
 * exit status is 0 only when every address of a live pod was recorded or already was, nothing
 * conflicted and every object could be read: anything else would leave an address Warren could
 * hand out twice once the definitions switch.
 */
import { printable, table } from '../format.ts';
import type { Problem } from './holdings.ts';
import type { Outcome, PlanEntry } from './plan.ts';

export interface MigrationReport {
  readonly dryRun: boolean;
  readonly entries: readonly PlanEntry[];
  readonly problems: readonly Problem[];
}

/** Outcomes that leave an address of a live pod unmigrated. */
const FAILING: ReadonlySet<Outcome> = new Set(['conflict', 'unresolved']);

export function exitStatusOf(report: MigrationReport): number {
  return report.problems.length > 0 || report.entries.some((e) => FAILING.has(e.outcome)) ? 1 : 0;
}

function shown(outcome: Outcome, dryRun: boolean): string {
  switch (outcome) {
    case 'record':
      return dryRun ? 'would record' : 'not recorded';
    case 'recorded':
      return 'recorded';
    case 'already-recorded':
      return 'already recorded';
    case 'pod-gone':
      return 'not migrated (pod gone)';
    case 'stale':
      return 'not migrated (not held)';
    case 'conflict':
      return 'CONFLICT';
    case 'unresolved':
      return 'UNRESOLVED';
    default: {
      const never: never = outcome;
      return String(never);
    }
  }
}

export function countsOf(entries: readonly PlanEntry[]): Record<Outcome, number> {
  const counts: Record<Outcome, number> = {
    record: 0,
    recorded: 0,
    'already-recorded': 0,
    'pod-gone': 0,
    stale: 0,
    conflict: 0,
    unresolved: 0,
  };
  for (const e of entries) counts[e.outcome] += 1;
  return counts;
}

export function reportJson(report: MigrationReport): string {
  const ranges = new Map<string, PlanEntry[]>();
  for (const e of report.entries) ranges.set(e.pool, [...(ranges.get(e.pool) ?? []), e]);
  return `${JSON.stringify(
    {
      dryRun: report.dryRun,
      ranges: [...ranges].map(([pool, entries]) => ({ pool, entries })),
      problems: report.problems,
      counts: countsOf(report.entries),
    },
    null,
    2,
  )}\n`;
}

export function reportText(report: MigrationReport): string {
  const parts: string[] = [];
  if (report.dryRun) parts.push('dry run: nothing is written\n');
  const ranges = new Map<string, PlanEntry[]>();
  for (const e of report.entries) ranges.set(e.pool, [...(ranges.get(e.pool) ?? []), e]);
  for (const [pool, entries] of [...ranges].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    parts.push(`\nrange ${printable(pool)}\n`);
    parts.push(
      table(
        ['ADDRESS', 'POD', 'NODE', 'OUTCOME'],
        entries.map((e) => [
          e.address,
          e.pod ?? '-',
          e.node ?? '-',
          `${shown(e.outcome, report.dryRun)}${e.detail === undefined ? '' : `: ${e.detail}`}`,
        ]),
      ),
    );
  }
  if (report.problems.length > 0) {
    parts.push('\nproblems (their addresses are not migrated):\n');
    for (const p of report.problems) parts.push(`  ${printable(p.object)}: ${printable(p.message)}\n`);
  }
  const c = countsOf(report.entries);
  const done = report.dryRun ? `${c.record} to record` : `${c.recorded} recorded`;
  parts.push(
    `\n${report.entries.length} addresses held by whereabouts: ${done}, ${c['already-recorded']} already recorded, ` +
      `${c['pod-gone'] + c.stale} free (pod gone or not holding it), ${c.conflict} conflicts, ` +
      `${c.unresolved} unresolved; ${report.problems.length} problems\n`,
  );
  if (exitStatusOf(report) !== 0)
    parts.push(
      'do not switch the definitions to warren until the conflicts, unresolved addresses and problems are settled\n',
    );
  else if (report.dryRun) parts.push('run again without --dry-run to record them\n');
  return parts.join('');
}
