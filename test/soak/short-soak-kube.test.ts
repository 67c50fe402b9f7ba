/**
 * The short soak on the kubernetes store, held to every change: a fixed seed's ~240 steps on three
 * real agents on the fake API server (test/soak/store-kube.ts), all on one network and one range,
 * through the real plugin executable, with the independent auditor looking after every step. Its
 * faults: kill -9 with CNI calls in flight, restarts, a state directory put back from an older copy
 * or deleted (the node takes back what it published), the API server stopped (refused, or answering 503) and
 * started again, watch streams and connections cut, the API server's etcd restored from an older
 * snapshot (the agents stop allocating, then the operator follows docs/recovery.md with the real
 * CLI), a WarrenBlock deleted by hand, a WarrenBlockPublication deleted by hand (written again by
 * its owner). It passes when the auditor finds nothing: no address held
 * by two live sandboxes on any node, no live sandbox's record gone, no operation lost, every
 * sandbox proven gone released (within a hang's bound here: the 10 s promise is measured by `npm
 * run soak`), nothing leaked, no address of a live sandbox left in another node's block, no node
 * stopped but by a restore. `npm run soak -- --store kubernetes --nodes 3 --seed 3818 --faults 60`
 * runs the same steps from the command line.
 *
 * Waits: as the SQLite short soak's (short-soak.test.ts); the operator's look at the agents' status
 * is a poll every second. Every agent is killed by PID, the fake API server stopped and every
 * directory and tmpfs mount removed when the run ends, passing or not. Needs root and the build.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isRoot } from '../helpers/processes.ts';
import { NODE_FAULTS, WORKLOAD_EXTRAS, planSoak } from './plan.ts';
import { formatReport } from './report.ts';
import { runSoak } from './soak-run.ts';
import { kubernetesBackend } from './store-kube.ts';
import { kubePlan } from './store-kube-plan.ts';

const SEED = 3818; // 3817 drew one restore of the API server once the state directory's deletion joined the plans
const FAULTS = 60;
const NODES = 3;
/** A hang's bound, not the promise's (see short-soak.test.ts). */
const RELEASE_HANG_BOUND_MS = 60_000;

describe('the short soak on the kubernetes store', {
  skip: isRoot() ? false : 'needs root (tmpfs netns directories)',
}, () => {
  it(`seed ${SEED}, ${FAULTS} faults on ${NODES} nodes sharing one range: no duplicate, no live address released, no operation lost, every orphan released, nothing leaked`, {
    timeout: 10 * 60_000,
  }, async () => {
    const plan = {
      seed: SEED,
      nodes: NODES,
      faults: FAULTS,
      podsPerNode: 12,
      operationsPerFault: 6,
      nodeFaults: NODE_FAULTS,
      // The workload's extra kinds too, as `npm run soak` draws them by default (its replay is this run).
      workload: WORKLOAD_EXTRAS,
    };
    const steps = planSoak({ ...plan, store: kubePlan });
    const report = await runSoak({
      seed: SEED,
      steps,
      nodes: NODES,
      settings: {}, // the agents' defaults, as a node runs them
      inFlight: 4,
      boundMs: RELEASE_HANG_BOUND_MS,
      settleMs: RELEASE_HANG_BOUND_MS + 30_000,
      store: kubernetesBackend,
      log: (line) => console.log(line.replace(/^/gm, '# ')),
    });
    const text = formatReport(
      report,
      steps,
      `npm run soak -- --store kubernetes --nodes ${NODES} --seed ${SEED} --faults ${FAULTS}`,
    );
    console.log(text.replace(/^/gm, '# '));
    assert.deepEqual(report.violations, [], text);
    assert.equal(report.stepsRun, steps.length);
    assert.ok(report.looks.unreadable * 10 < report.looks.total, `looks: ${JSON.stringify(report.looks)}`);
    const faults = report.faults;
    assert.ok((faults.kill ?? 0) >= 10, `kills: ${JSON.stringify(faults)}`);
    assert.ok((faults['restore-state'] ?? 0) >= 1, `restores of a state directory: ${JSON.stringify(faults)}`);
    assert.ok((faults['wipe-state'] ?? 0) >= 1, `state directories deleted: ${JSON.stringify(faults)}`);
    assert.ok((faults['api-restore'] ?? 0) >= 2, `restores of the API server: ${JSON.stringify(faults)}`);
    assert.ok(
      (faults['store accept (docs/recovery.md)'] ?? 0) >= 1,
      `the procedure followed: ${JSON.stringify(faults)}`,
    );
    assert.ok((faults['api-stop'] ?? 0) >= 1 && (faults['claim-delete'] ?? 0) >= 1, JSON.stringify(faults));
  });
});
