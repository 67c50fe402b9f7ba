/**
 * `warren doctor`'s output. For a person: one line per finding with its marker (✓ ok, ! warning,
 * ✗ error), the detail and the fix indented under it, and a closing count; every value shown
 * through `printable`, since paths and messages come from files anyone with write access to the
 * conf dir chose. For scripts (--json): `{ ok, findings }`, the findings as they are.
 */
import { printable } from '../format.ts';
import { type Finding, type Severity, allWell } from './finding.ts';

export interface DoctorReport {
  /** No finding is an error. */
  readonly ok: boolean;
  readonly findings: readonly Finding[];
}

export function reportOf(findings: readonly Finding[]): DoctorReport {
  return { ok: allWell(findings), findings };
}

const MARKERS: Readonly<Record<Severity, string>> = { ok: '✓', warning: '!', error: '✗' };

export function renderJson(findings: readonly Finding[]): string {
  return `${JSON.stringify(reportOf(findings), null, 2)}\n`;
}

export function renderHuman(findings: readonly Finding[]): string {
  const lines: string[] = [];
  for (const f of findings) {
    lines.push(`${MARKERS[f.severity]} ${printable(f.title)}  [${f.id}]`);
    lines.push(`    ${printable(f.detail)}`);
    if (f.fix !== undefined) lines.push(`    fix: ${printable(f.fix)}`);
  }
  const count = (s: Severity) => findings.filter((f) => f.severity === s).length;
  const errors = count('error');
  const warnings = count('warning');
  lines.push('');
  lines.push(
    `${errors} error${errors === 1 ? '' : 's'}, ${warnings} warning${warnings === 1 ? '' : 's'}, ${count('ok')} ok: ` +
      (errors > 0
        ? 'the node is not set up right; fix the errors above'
        : warnings > 0
          ? 'the node works; the warnings are worth a look'
          : 'all well'),
  );
  return `${lines.join('\n')}\n`;
}
