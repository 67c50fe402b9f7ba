/**
 * A soak run said in words: what ran, what was injected, the release latencies per source, what
 * explained the releases observed (the agents' release lines by source, the DELs, a file put back)
 * and each node's last agent's release counter against them, and on
 * failure the seed, the command that replays it and the steps up to the last violation (faults
 * marked), so a failure is reproducible from its report alone.
 */
import { type Step, describeStep, isFault } from './plan.ts';
import type { SoakReport } from './soak-run.ts';

export function formatReport(report: SoakReport, steps: readonly Step[], rerun: string): string {
  const lines = [
    `soak seed ${report.seed}: ${report.stepsRun} steps in ${(report.durationMs / 1000).toFixed(1)} s`,
    `faults: ${JSON.stringify(report.faults)}`,
    `operations: ${JSON.stringify(report.operations)}`,
    `auditor's looks at the nodes' files: ${report.looks.total} (${report.looks.unreadable} could not read it)`,
    'release latency, the agent running, from provable to its record gone from the file (wall max: downtime included):',
    '  source    count    p50 ms    p99 ms    max ms  wall max ms',
    ...report.latencies.map(
      (l) =>
        `  ${l.source.padEnd(8)} ${String(l.count).padStart(6)} ${String(l.p50Ms).padStart(9)} ${String(l.p99Ms).padStart(9)} ${String(l.maxMs).padStart(9)} ${String(l.wallMaxMs).padStart(12)}`,
    ),
    `releases observed, explained by: ${JSON.stringify(report.explanations.by)}`,
    ...report.explanations.counters.map((c) => `  counter: ${c}`),
    ...(report.explanations.events === undefined ? [] : [`  Events: ${report.explanations.events}`]),
  ];
  if (report.violations.length === 0) {
    lines.push('auditor: no violation');
    return lines.join('\n');
  }
  lines.push(`auditor: ${report.violations.length} violation(s), seed ${report.seed}; replay: ${rerun}`);
  for (const v of report.violations.slice(0, 40)) lines.push(`  at step ${v.step}: ${v.what}`);
  const last = Math.min(steps.length - 1, Math.max(...report.violations.map((v) => v.step)));
  lines.push(`the steps up to step ${last} (faults marked *):`);
  for (const [i, step] of steps.slice(0, last + 1).entries())
    lines.push(`  ${String(i).padStart(4)}${isFault(step) ? '*' : ' '} ${describeStep(step)}`);
  return lines.join('\n');
}
