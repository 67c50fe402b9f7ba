/**
 * What `warren migrate to-whereabouts` prints: a table per IPPool (address, pod, container,
 * outcome), the problems, and a summary; or the same as one JSON document.
 *
 * Guarantees: every string read from the cluster goes through `printable` (format.ts) in the text
 * form; the exit status is 0 only when every address a container holds in Warren is in
 * whereabouts' objects (written, or already there) and nothing conflicted or could not be read:
 * anything else would let whereabouts hand out an address a pod holds once the definitions switch
 * back. Addresses Warren holds for no container (`not-written`) do not fail it.
 */
import { printable, table } from '../format.ts';
import type { RollbackReport } from './rollback.ts';
import type { RollbackEntry, RollbackOutcome } from './rollback-plan.ts';

export function rollbackExitStatus(report: RollbackReport): number {
  return report.problems.length > 0 || report.entries.some((e) => e.outcome === 'conflict') ? 1 : 0;
}

function shown(outcome: RollbackOutcome, dryRun: boolean): string {
  switch (outcome) {
    case 'write':
      return dryRun ? 'would write' : 'not written';
    case 'written':
      return 'written';
    case 'present':
      return 'already in whereabouts';
    case 'conflict':
      return 'CONFLICT';
    case 'not-written':
      return 'not written';
    default: {
      const never: never = outcome;
      return String(never);
    }
  }
}

export function rollbackCounts(entries: readonly RollbackEntry[]): Record<RollbackOutcome, number> {
  const counts: Record<RollbackOutcome, number> = { write: 0, written: 0, present: 0, conflict: 0, 'not-written': 0 };
  for (const e of entries) counts[e.outcome] += 1;
  return counts;
}

function byIpPool(entries: readonly RollbackEntry[]): Array<[string, RollbackEntry[]]> {
  const pools = new Map<string, RollbackEntry[]>();
  for (const e of entries) pools.set(e.ipPool, [...(pools.get(e.ipPool) ?? []), e]);
  return [...pools].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

export function rollbackJson(report: RollbackReport): string {
  return `${JSON.stringify(
    {
      dryRun: report.dryRun,
      namespace: report.namespace,
      ipPools: byIpPool(report.entries).map(([ipPool, entries]) => ({ ipPool, entries })),
      problems: report.problems,
      counts: rollbackCounts(report.entries),
    },
    null,
    2,
  )}\n`;
}

export function rollbackText(report: RollbackReport): string {
  const parts: string[] = [];
  if (report.dryRun) parts.push('dry run: nothing is written\n');
  for (const [ipPool, entries] of byIpPool(report.entries)) {
    parts.push(`\nIPPool ${printable(report.namespace)}/${printable(ipPool)}\n`);
    parts.push(
      table(
        ['ADDRESS', 'POD', 'CONTAINER', 'OUTCOME'],
        entries.map((e) => [
          e.address,
          printable(e.pod ?? '-'),
          printable((e.container ?? '-').slice(0, 12)),
          `${shown(e.outcome, report.dryRun)}${e.detail === undefined ? '' : `: ${printable(e.detail)}`}`,
        ]),
      ),
    );
  }
  if (report.problems.length > 0) {
    parts.push('\nproblems:\n');
    for (const p of report.problems) parts.push(`  ${printable(p.object)}: ${printable(p.message)}\n`);
  }
  const c = rollbackCounts(report.entries);
  const done = report.dryRun ? `${c.write} to write` : `${c.written} written`;
  parts.push(
    `\n${report.entries.length} addresses held by Warren: ${done}, ${c.present} already in whereabouts, ` +
      `${c.conflict} conflicts, ${c['not-written']} held for no container (not written); ` +
      `${report.problems.length} problems\n`,
  );
  if (rollbackExitStatus(report) !== 0)
    parts.push('do not switch the definitions back to whereabouts until the conflicts and problems are settled\n');
  else if (report.dryRun) parts.push('run again without --dry-run to write them\n');
  return parts.join('');
}
