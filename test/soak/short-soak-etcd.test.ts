/**
 * The short soak on the etcd store, held to every change: a fixed seed's ~240 steps on two real
 * agents sharing ONE network name and ONE range on a real 3-member etcd cluster (store-etcd.ts),
 * through the real plugin executable, with the independent auditor looking after every step: the
 * nodes' faults (kill -9 with CNI calls in flight, restarts, a state directory put back from an
 * older copy, whose published containers come back) and etcd's own (a member killed -9 and started
 * again, the leader killed, the whole cluster restored from an older snapshot and recovered by the
 * procedure of docs/recovery.md with the real CLI, a claim, a publication (written again by its owner)
 * and an announcement deleted by hand). It
 * passes when the auditor finds nothing: no address held by two live sandboxes on any nodes, no
 * live sandbox's record gone, no operation lost, every sandbox proven gone released (within a
 * hang's bound here; `npm run soak` measures the 10 s), nothing leaked at the end, no two nodes'
 * claims overlapping, and every live address in a block its node claims or borrows.
 * `npm run soak -- --store etcd --seed 3807 --faults 30` runs the same steps from the command line.
 *
 * Waits: every step's wait is bounded by the helpers (HANG_BOUND_MS); releases are measured by
 * polling the nodes' files, etcd by a look every second between steps; no sleep waits for an
 * event. Every agent and etcd member is killed by PID and every directory and tmpfs mount removed
 * when the run ends, passing or not. Needs root (the tmpfs mounts), etcd-server and the build.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ETCD_BIN } from '../helpers/etcd.ts';
import { isRoot } from '../helpers/processes.ts';
import { NODE_FAULTS, WORKLOAD_EXTRAS, planSoak } from './plan.ts';
import { formatReport } from './report.ts';
import { runSoak } from './soak-run.ts';
import { etcdBackend, etcdPlan } from './store-etcd.ts';

const SEED = 3807;
const FAULTS = 60;
/** A hang's bound, as the short soak on SQLite holds (short-soak.test.ts says why not 10 s). */
const RELEASE_HANG_BOUND_MS = 60_000;

const skip = !isRoot() ? 'needs root (tmpfs netns directories)' : !existsSync(ETCD_BIN) ? `needs ${ETCD_BIN}` : false;

describe('the short soak on the etcd store', { skip }, () => {
  it(`seed ${SEED}, ${FAULTS} faults: no duplicate across nodes, no live address released, no operation lost, every orphan released, every live address claimed`, {
    timeout: 10 * 60_000,
  }, async () => {
    const steps = planSoak({
      seed: SEED,
      nodes: 2,
      faults: FAULTS,
      podsPerNode: 12,
      operationsPerFault: 6,
      nodeFaults: NODE_FAULTS,
      // The workload's extra kinds too, as `npm run soak` draws them by default (its replay is this run).
      workload: WORKLOAD_EXTRAS,
      store: etcdPlan,
    });
    const report = await runSoak({
      seed: SEED,
      steps,
      nodes: 2,
      settings: {}, // the agents' defaults, as a node runs them
      inFlight: 4,
      boundMs: RELEASE_HANG_BOUND_MS,
      settleMs: RELEASE_HANG_BOUND_MS + 30_000,
      store: etcdBackend,
      log: (line) => console.log(line.replace(/^/gm, '# ')),
    });
    const text = formatReport(report, steps, `npm run soak -- --store etcd --seed ${SEED} --faults ${FAULTS}`);
    console.log(text.replace(/^/gm, '# '));
    assert.deepEqual(report.violations, [], text);
    assert.equal(report.stepsRun, steps.length);
    assert.ok(report.looks.unreadable * 10 < report.looks.total, `looks: ${JSON.stringify(report.looks)}`);
    const drawn = ['kill', 'restore-state', 'wipe-state', 'member-kill', 'leader-kill', 'restore', 'claim-delete'];
    for (const fault of drawn)
      assert.ok((report.faults[fault] ?? 0) >= 1, `${fault}: ${JSON.stringify(report.faults)}`);
  });
});
