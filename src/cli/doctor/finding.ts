/**
 * What `warren doctor` says about one thing on the node: a finding. Its `id` is stable and
 * kebab-case (`plugin-missing`, `journal-dir-mismatch`), for scripts to match on; the title and
 * detail are for a person and may change. Every finding that is not `ok` carries a `fix`: a
 * command or a flag an operator can act on, never only a description of the problem.
 *
 * The verdict of a whole run follows from the findings alone: any `error` fails it (exit 1);
 * warnings are worth reading but leave the node working.
 */

export const SEVERITIES = ['ok', 'warning', 'error'] as const;
export type Severity = (typeof SEVERITIES)[number];

export interface Finding {
  /** Stable, kebab-case; several findings may share one (a mismatch in each of two configs). */
  readonly id: string;
  readonly severity: Severity;
  /** One line: what was checked and what was found. */
  readonly title: string;
  /** The facts behind it: paths, values on both sides. */
  readonly detail: string;
  /** What to do, in words an operator can act on; set on every warning and error. */
  readonly fix?: string;
}

export function ok(id: string, title: string, detail: string): Finding {
  return { id, severity: 'ok', title, detail };
}

export function warning(id: string, title: string, detail: string, fix: string): Finding {
  return { id, severity: 'warning', title, detail, fix };
}

export function error(id: string, title: string, detail: string, fix: string): Finding {
  return { id, severity: 'error', title, detail, fix };
}

/** True when no finding is an error: the node works, whatever the warnings say. */
export function allWell(findings: readonly Finding[]): boolean {
  return !findings.some((f) => f.severity === 'error');
}

/** The exit code of `warren doctor`: 0 when no finding is an error, 1 when any is. */
export function exitCodeOf(findings: readonly Finding[]): 0 | 1 {
  return allWell(findings) ? 0 : 1;
}
