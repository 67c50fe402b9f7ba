/**
 * The short soak, held to every change: a fixed seed's ~200 steps (workload operations and
 * faults: kill -9 with CNI calls in flight, restarts, a state directory put back from an older
 * copy, a node's wall clock stepped, its disk full and freed) on two real agents over their own
 * SQLite files, on the agents' own defaults, through the real plugin executable, with
 * the independent auditor (test/soak/auditor.ts) looking after every step. It passes when the
 * auditor finds nothing: no address held by two live sandboxes, no live sandbox's record gone, no
 * operation lost, every sandbox proven gone released (within a hang's bound here: the 10 s promise
 * is measured by `npm run soak`, whose figures this prints too), nothing leaked at the end.
 * `npm run soak -- --seed 3801 --faults 24` runs the same steps from the command line.
 *
 * Waits: every step's wait is bounded by the helpers (HANG_BOUND_MS); the release latency is
 * measured by polling the nodes' files (every 100 ms and after each step), and the end polls them
 * with a deadline for the last releases. No sleep waits for an event. Every agent is killed by
 * PID and every directory and tmpfs mount removed when the run ends, passing or not. Needs root
 * (the tmpfs mounts) and the build (`node scripts/build.ts`).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isRoot } from '../helpers/processes.ts';
import { NODE_FAULTS, WORKLOAD_EXTRAS, planSoak } from './plan.ts';
import { formatReport } from './report.ts';
import { runSoak } from './soak-run.ts';

const SEED = 3801;
const FAULTS = 100;
/**
 * The release bound this test holds: a hang's, not the promise's. The promise (10 s, the driver's
 * default) is a figure `npm run soak` measures and prints; at load 16 here (12 busy loops on 2 cores)
 * this run's p99 was 8.8 s of agent time, so a 10 s bound would fail on the loads a test must pass at.
 */
const RELEASE_HANG_BOUND_MS = 60_000;

describe('the short soak on the SQLite store', {
  skip: isRoot() ? false : 'needs root (tmpfs netns directories)',
}, () => {
  it(`seed ${SEED}, ${FAULTS} faults: no duplicate, no live address released, no operation lost, every orphan released, nothing leaked`, {
    timeout: 10 * 60_000,
  }, async () => {
    const steps = planSoak({
      seed: SEED,
      nodes: 2,
      faults: FAULTS,
      podsPerNode: 12,
      operationsPerFault: 6,
      nodeFaults: NODE_FAULTS,
      // The workload's extra kinds too, as `npm run soak` draws them by default (its replay is this
      // run); a node lost needs a store that forgets nodes, so soak.ts drops it on SQLite.
      workload: WORKLOAD_EXTRAS.filter((extra) => extra !== 'node-lost'),
    });
    const report = await runSoak({
      seed: SEED,
      steps,
      nodes: 2,
      settings: {}, // the agents' defaults, as a node runs them
      inFlight: 4,
      boundMs: RELEASE_HANG_BOUND_MS,
      settleMs: RELEASE_HANG_BOUND_MS + 30_000,
      log: (line) => console.log(line.replace(/^/gm, '# ')),
    });
    const text = formatReport(report, steps, `npm run soak -- --seed ${SEED} --faults ${FAULTS}`);
    console.log(text.replace(/^/gm, '# '));
    assert.deepEqual(report.violations, [], text);
    assert.equal(report.stepsRun, steps.length);
    // A look that cannot read a file checks nothing: the verdict stands on looks that did.
    assert.ok(report.looks.unreadable * 10 < report.looks.total, `looks: ${JSON.stringify(report.looks)}`);
    assert.ok((report.faults.kill ?? 0) >= 10, `kills: ${JSON.stringify(report.faults)}`);
    assert.ok((report.faults['restore-state'] ?? 0) >= 1, `restores: ${JSON.stringify(report.faults)}`);
    assert.ok((report.faults['wipe-state'] ?? 0) >= 1, `state directories deleted: ${JSON.stringify(report.faults)}`);
    assert.ok((report.faults['disk-full'] ?? 0) >= 1, `full disks: ${JSON.stringify(report.faults)}`);
    assert.ok((report.faults['clock-step'] ?? 0) >= 1, `clock steps: ${JSON.stringify(report.faults)}`);
  });
});
