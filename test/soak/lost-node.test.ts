/**
 * The ground truth and the auditor on the workload's extra kinds: a pod re-created under its name
 * (a StatefulSet replica) gets a new UID and its new sandbox is held to its own record, whatever
 * befell the old one; a sandbox of a node lost and forgotten is released when the harness sees the
 * cluster free it (never by its dead node's file, which still holds it), and its latency is counted
 * on the wall clock from the forget, not from its node's agent, which never runs again.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, it } from 'node:test';
import { tempDir } from '../helpers/processes.ts';
import { type AuditedNode, Auditor } from './auditor.ts';
import { GroundTruth, releasedInCluster } from './ground-truth.ts';

/** A node whose file holds `records` (container ID → address) and whose agent ran `ran` of any span. */
function node(index: number, records: Record<string, string>, ran: 'always' | 'never'): AuditedNode {
  const database = join(tempDir('warren-lost-node-'), 'warren.db');
  const db = new DatabaseSync(database);
  db.exec('CREATE TABLE allocations (container_id TEXT, address TEXT)');
  const insert = db.prepare('INSERT INTO allocations VALUES (?, ?)');
  for (const [id, address] of Object.entries(records)) insert.run(id, address);
  db.close();
  return {
    index,
    name: `node-${index}`,
    database,
    busy: false,
    runningMs: (from, to) => (ran === 'always' ? to - from : 0),
  };
}

describe('the soak on re-created pods and forgotten nodes', () => {
  it("gives a re-created pod a new UID under its name, and its new sandbox that UID, the old one's kept", () => {
    const truth = new GroundTruth();
    const old = truth.newSandbox(7, 0);
    assert.equal(old.uid, 'uid-7', 'the first UID is the one pods had before re-creations');
    assert.equal(truth.recreated(7), 'uid-7-1');
    const replica = truth.newSandbox(7, 1);
    assert.equal(replica.uid, 'uid-7-1');
    assert.equal(old.uid, 'uid-7');
    assert.equal(truth.current(7), replica, "the pod's newest sandbox");
    assert.equal(truth.recreated(7), 'uid-7-2');
  });

  it("holds a re-created pod's new sandbox to its record, the old one gone and released", () => {
    const truth = new GroundTruth();
    const old = truth.newSandbox(3, 0);
    truth.markLive(old, '10.0.0.3');
    truth.markGone(old, 'netns', Date.now() - 1_000);
    truth.recreated(3);
    const replica = truth.newSandbox(3, 0);
    truth.markLive(replica, '10.0.0.4');
    // The old sandbox's record released, and the replica's too: the same pod name must not take it.
    const auditor = new Auditor([node(0, {}, 'always')], truth, 10_000);
    auditor.check();
    assert.ok(old.releasedAt !== undefined, 'the old sandbox released');
    assert.deepEqual(
      auditor.violations.map((v) => v.what),
      [`node-0: live sandbox ${replica.id}'s 10.0.0.4 is gone from the file`],
    );
  });

  it("judges a forgotten node's sandbox released in the cluster, on the wall clock from the forget", () => {
    const truth = new GroundTruth();
    const s = truth.newSandbox(0, 0);
    truth.markLive(s, '10.0.0.1');
    const forgotAt = Date.now() - 3_000;
    truth.markGone(s, 'forget', forgotAt);
    assert.equal(releasedInCluster(s), true);
    // The node back as a new machine: its file empty, though the cluster may still hold the address.
    const auditor = new Auditor([node(0, {}, 'never')], truth, 2_000);
    auditor.check();
    assert.equal(s.releasedAt, undefined, 'the file is not what releases it');
    assert.deepEqual(auditor.unreleased(), [s]);
    s.releasedAt = forgotAt + 2_500; // the harness saw the cluster stop holding it
    assert.equal(auditor.latencyOf(s), 2_500, "not the lost node's agent's running time (0)");
    assert.deepEqual(
      auditor.latencies().map((l) => [l.source, l.count, l.maxMs]),
      [['forget', 1, 2_500]],
    );
  });

  it('counts a forget made just before the API server went away from its return, and one made long before from the forget', () => {
    // kubernetes seed 3839, steps 6176-6182: a Node deleted, the API server stopped two steps later
    // and started again four steps after: no agent could see the deletion before it was back.
    const truth = new GroundTruth();
    const [justBefore, longBefore, released] = [0, 1, 2].map((i) => {
      const s = truth.newSandbox(0, i);
      truth.markLive(s, `10.0.0.${i + 1}`);
      return s;
    });
    assert.ok(justBefore && longBefore && released);
    const awayFrom = 100_000;
    truth.markGone(justBefore, 'forget', awayFrom - 5);
    truth.markGone(longBefore, 'forget', awayFrom - 20_000);
    truth.markGone(released, 'forget', awayFrom - 5);
    released.releasedAt = awayFrom - 1;
    const back = awayFrom + 30_000;
    truth.forgetsProvableFrom(back, awayFrom - 10_000); // soak-run.ts: the bound (10 s) before it went away
    assert.equal(justBefore.goneAt, back, 'provable from the return');
    assert.equal(longBefore.goneAt, awayFrom - 20_000, 'owed its release before the outage: judged from its forget');
    assert.equal(released.goneAt, awayFrom - 5, 'released already');
  });

  it("finds a forgotten node's sandbox still held at the end", () => {
    const truth = new GroundTruth();
    const s = truth.newSandbox(0, 0);
    truth.markLive(s, '10.0.0.1');
    truth.markGone(s, 'forget', Date.now());
    const auditor = new Auditor([node(0, {}, 'never')], truth, 10_000);
    auditor.check();
    auditor.final();
    assert.deepEqual(
      auditor.violations.map((v) => v.what),
      [`sandbox ${s.id} (gone by forget) still held at the end`],
    );
  });
});
