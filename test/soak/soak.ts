/**
 * The soak's driver (`npm run soak -- --store kubernetes --faults N --seed S`): plans a seed's
 * steps, runs them on real agents on the store named (soak-run.ts, store.ts) and prints the
 * auditor's verdict and the release latencies. Exit 0 when the auditor found nothing, 1 when it did
 * (with the seed, the replay command and the steps), 2 on bad flags. Needs root (a tmpfs per node
 * for its netns directory) and a build (`node scripts/build.ts`, done by the npm script).
 *
 * Flags: --store sqlite|kubernetes|etcd (sqlite: each node its own file; the others a cluster the
 * nodes share, with that store's own faults), --faults N (kills, restarts, restores, the store's
 * own; default 100), --seed S (default: from the clock, printed), --steps K (replay only the first
 * K steps of the seed's plan), --shrink (on failure, halve K while a prefix still fails, and print
 * the shortest failing prefix found), --trace (each step on stderr as it begins), --nodes N (2),
 * --ops-per-fault N (6), --pods-per-node N (12), --in-flight N (4), --bound-ms MS (10000),
 * --node-faults clock,disk,wipe|none (the nodes' faults beyond their agents' deaths: wall clocks
 * stepped, disks full, state directories deleted; default all three, and `clock,disk` draws the plans
 * drawn before the wipe), --workload recreate,node-lost|none (the workload's kinds beyond
 * create, delete, force-delete and crash loops: StatefulSet re-creation, a node lost and forgotten,
 * the latter only on a store that forgets nodes; default both), --reconcile-interval S and --netns-grace S for the agents (unset:
 * the agents' own defaults, as a node runs them), --keep-logs DIR (each agent's whole log kept in
 * DIR/NODE.log, every start of it appended: what a failure's diagnosis reads).
 *
 * `kill -TERM <pid>` of this process stops the run after the step under way, with the verdict on
 * the steps run (Ctrl-C in a terminal signals the agents of the process group too, and they stop).
 */
import { mkdirSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { stopOnSignals } from '../helpers/processes.ts';
import { NODE_FAULTS, type NodeFault, type Step, WORKLOAD_EXTRAS, type WorkloadExtra, planSoak } from './plan.ts';
import { formatReport } from './report.ts';
import { type SoakReport, runSoak } from './soak-run.ts';
import { STORE_NAMES, type StoreName } from './store.ts';
import { STORES } from './stores.ts';

const { values } = parseArgs({
  options: {
    store: { type: 'string', default: 'sqlite' },
    faults: { type: 'string', default: '100' },
    seed: { type: 'string' },
    steps: { type: 'string' },
    shrink: { type: 'boolean', default: false },
    trace: { type: 'boolean', default: false },
    nodes: { type: 'string', default: '2' },
    'ops-per-fault': { type: 'string', default: '6' },
    'pods-per-node': { type: 'string', default: '12' },
    'in-flight': { type: 'string', default: '4' },
    'bound-ms': { type: 'string', default: '10000' },
    'reconcile-interval': { type: 'string' },
    'keep-logs': { type: 'string' },
    'netns-grace': { type: 'string' },
    'node-faults': { type: 'string', default: NODE_FAULTS.join(',') },
    workload: { type: 'string', default: WORKLOAD_EXTRAS.join(',') },
  },
});

function number(flag: keyof typeof values): number {
  const value = Number(values[flag]);
  if (!Number.isFinite(value) || value < 0) {
    process.stderr.write(`--${flag} must be a number ≥ 0, not ${String(values[flag])}\n`);
    process.exit(2);
  }
  return value;
}

if (!(STORE_NAMES as readonly string[]).includes(values.store)) {
  process.stderr.write(`--store must be one of ${STORE_NAMES.join(', ')}, not ${values.store}\n`);
  process.exit(2);
}
const store = STORES[values.store as StoreName];
const nodeFaults = values['node-faults'] === 'none' ? [] : values['node-faults'].split(',');
for (const fault of nodeFaults)
  if (!(NODE_FAULTS as readonly string[]).includes(fault)) {
    process.stderr.write(`--node-faults takes ${NODE_FAULTS.join(',')} or none, not ${fault}\n`);
    process.exit(2);
  }
const asked = values.workload === 'none' ? [] : values.workload.split(',');
for (const extra of asked)
  if (!(WORKLOAD_EXTRAS as readonly string[]).includes(extra)) {
    process.stderr.write(`--workload takes ${WORKLOAD_EXTRAS.join(',')} or none, not ${extra}\n`);
    process.exit(2);
  }
// A node lost is forgotten by the store's operator: a store without nodes to forget (SQLite) never loses one.
const workload = (asked as WorkloadExtra[]).filter((extra) => extra !== 'node-lost' || store.forgetsNodes === true);
const seed = values.seed === undefined ? Date.now() % 1_000_000 : number('seed');
const nodes = Math.max(1, number('nodes'));
const plan = planSoak({
  seed,
  nodes,
  faults: number('faults'),
  podsPerNode: number('pods-per-node'),
  operationsPerFault: number('ops-per-fault'),
  nodeFaults: nodeFaults as NodeFault[],
  workload,
  ...(store.plan === undefined ? {} : { store: store.plan }),
});
// Unset: the agents run on their own defaults, as a node runs them.
const settings = {
  ...(values['reconcile-interval'] === undefined ? {} : { reconcileIntervalSeconds: number('reconcile-interval') }),
  ...(values['netns-grace'] === undefined ? {} : { netnsGraceSeconds: number('netns-grace') }),
  ...(values['keep-logs'] === undefined ? {} : { logsDir: values['keep-logs'] }),
};
if (settings.logsDir !== undefined) mkdirSync(settings.logsDir, { recursive: true });
const boundMs = number('bound-ms');

const flags = (steps: number) =>
  [
    `--store ${store.name}`,
    `--seed ${seed}`,
    `--faults ${values.faults}`,
    `--steps ${steps}`,
    `--nodes ${nodes}`,
    `--ops-per-fault ${values['ops-per-fault']}`,
    `--pods-per-node ${values['pods-per-node']}`,
    `--in-flight ${values['in-flight']}`,
    `--bound-ms ${boundMs}`,
    `--node-faults ${nodeFaults.length === 0 ? 'none' : nodeFaults.join(',')}`,
    `--workload ${workload.length === 0 ? 'none' : workload.join(',')}`,
    ...(settings.reconcileIntervalSeconds === undefined
      ? []
      : [`--reconcile-interval ${settings.reconcileIntervalSeconds}`]),
    ...(settings.netnsGraceSeconds === undefined ? [] : [`--netns-grace ${settings.netnsGraceSeconds}`]),
  ].join(' ');

/**
 * SIGINT, SIGTERM or SIGHUP stops the run after the step under way: it ends as a prefix does, with
 * every process it started stopped and its tmpfs unmounted, and prints the verdict on the steps run
 * (a long run stopped for the machine's sake keeps what it proved). A second signal kills what it
 * started and exits at once.
 */
const stop = new AbortController();
stopOnSignals((signal) => {
  process.stderr.write(`# ${signal}: stopping after the step under way; the verdict is on the steps run\n`);
  stop.abort();
});

/** `logs`: print the agents' logs on a failure (the first run's; a shrinking probe's are not). */
async function run(steps: readonly Step[], logs: boolean): Promise<SoakReport> {
  return runSoak({
    stop: stop.signal,
    seed,
    steps,
    nodes,
    settings,
    inFlight: Math.max(1, number('in-flight')),
    boundMs,
    settleMs: boundMs + 30_000,
    store,
    ...(logs ? { log: (line: string) => process.stderr.write(`${line}\n`) } : {}),
    ...(values.trace ? { trace: (line: string) => process.stderr.write(`${line}\n`) } : {}),
    ...(logs ? { progress: (line: string) => process.stderr.write(`${line}\n`) } : {}),
  });
}

const first = values.steps === undefined ? plan.length : Math.min(plan.length, number('steps'));
console.log(`# soak seed ${seed}: ${first} steps on ${nodes} nodes (store ${store.name})`);
const report = await run(plan.slice(0, first), true);
if (report.stepsRun < first)
  console.log(`# stopped by a signal after ${report.stepsRun} of ${first} steps: the verdict below is on those`);
console.log(formatReport(report, plan, `npm run soak -- ${flags(report.stepsRun)}`));
if (report.violations.length > 0 && values.shrink && !stop.signal.aborted) {
  // Halving: the shortest prefix found that still fails. Real processes make a failure depend on
  // timing too, so a prefix that passed once is not proven to pass: this narrows, it does not prove.
  let failing = Math.min(first, Math.max(...report.violations.map((v) => v.step)) + 1);
  let passing = 0;
  while (failing - passing > 1) {
    const k = Math.floor((failing + passing) / 2);
    const probe = await run(plan.slice(0, k), false);
    console.log(`# shrink: first ${k} steps ${probe.violations.length > 0 ? 'fail' : 'pass'}`);
    if (probe.violations.length > 0) failing = k;
    else passing = k;
  }
  console.log(`# shortest failing prefix found: ${failing} steps; replay: npm run soak -- ${flags(failing)}`);
}
process.exit(report.violations.length > 0 ? 1 : 0);
