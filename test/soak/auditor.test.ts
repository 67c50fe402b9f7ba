/**
 * The soak's auditor catches what it says it catches, on files written here (the allocations
 * table as the node's SQLite file has it) and a ground truth set by hand: two live sandboxes on
 * one address, a live sandbox's record gone, a gone sandbox still held or released past the
 * bound, a record nobody live holds at the end. Times are set in the past, not waited for.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, it } from 'node:test';
import { tempDir } from '../helpers/processes.ts';
import { type AuditedNode, Auditor } from './auditor.ts';
import { GroundTruth, type Sandbox } from './ground-truth.ts';

/** A node whose file holds `records` (container ID → address) and whose agent has run all along. */
function node(
  index: number,
  records: Record<string, string>,
): AuditedNode & { write(r: Record<string, string>): void } {
  const database = join(tempDir('warren-auditor-'), 'warren.db');
  const write = (r: Record<string, string>) => {
    const db = new DatabaseSync(database);
    db.exec('CREATE TABLE IF NOT EXISTS allocations (container_id TEXT, address TEXT); DELETE FROM allocations');
    const insert = db.prepare('INSERT INTO allocations VALUES (?, ?)');
    for (const [id, address] of Object.entries(r)) insert.run(id, address);
    db.close();
  };
  write(records);
  return { index, name: `node-${index}`, database, busy: false, runningMs: (from, to) => to - from, write };
}

describe('the soak auditor', () => {
  it('finds two live sandboxes of one node on one address, and not two nodes on one address', () => {
    const truth = new GroundTruth();
    const nodes = [node(0, { p0s0: '10.0.0.1', p1s1: '10.0.0.1' }), node(1, { p2s2: '10.0.0.1' })];
    truth.markLive(truth.newSandbox(0, 0), '10.0.0.1');
    truth.markLive(truth.newSandbox(1, 0), '10.0.0.1');
    truth.markLive(truth.newSandbox(2, 1), '10.0.0.1');
    const auditor = new Auditor(nodes, truth, 10_000);
    auditor.check();
    assert.deepEqual(
      auditor.violations.map((v) => v.what),
      ['node-0: 10.0.0.1 held by live sandboxes p0s0, p1s1'],
    );
  });

  it('finds two live sandboxes of different nodes on one address when the nodes share one range', () => {
    const truth = new GroundTruth();
    const nodes = [node(0, { p0s0: '10.0.0.1' }), node(1, { p1s1: '10.0.0.1' })];
    truth.markLive(truth.newSandbox(0, 0), '10.0.0.1');
    truth.markLive(truth.newSandbox(1, 1), '10.0.0.1');
    const auditor = new Auditor(nodes, truth, 10_000, { sharedRange: true });
    auditor.check();
    assert.deepEqual(
      auditor.violations.map((v) => v.what),
      ['all nodes: 10.0.0.1 held by live sandboxes p0s0, p1s1'],
    );
  });

  it('spares a live sandbox whose file was put back until its store writes it back, and finds one never back', () => {
    const truth = new GroundTruth();
    const n = node(0, {});
    const [back, never] = [0, 1].map((pod) => truth.newSandbox(pod, 0)) as [Sandbox, Sandbox];
    truth.markLive(back, '10.0.0.1');
    truth.markLive(never, '10.0.0.2');
    back.returning = true;
    never.returning = true;
    const auditor = new Auditor([n], truth, 10_000);
    auditor.check();
    assert.equal(auditor.violations.length, 0, JSON.stringify(auditor.violations));
    n.write({ p0s0: '10.0.0.1' });
    auditor.check();
    auditor.final();
    assert.deepEqual(
      auditor.violations.map((v) => v.what),
      ["live sandbox p1s1's 10.0.0.2 never came back to its node's file after the file was put back"],
    );
  });

  it("finds a live sandbox's record gone from its node's file, or holding another address", () => {
    const truth = new GroundTruth();
    const nodes = [node(0, { p1s1: '10.0.0.9' })];
    truth.markLive(truth.newSandbox(0, 0), '10.0.0.1');
    truth.markLive(truth.newSandbox(1, 0), '10.0.0.2');
    const auditor = new Auditor(nodes, truth, 10_000);
    auditor.check();
    assert.deepEqual(
      auditor.violations.map((v) => v.what),
      [
        "node-0: live sandbox p0s0's 10.0.0.1 is gone from the file",
        'node-0: live sandbox p1s1 holds 10.0.0.9 in the file, its ADD said 10.0.0.2',
      ],
    );
  });

  it('measures a release from its proof, and finds one past the bound, one never released and a leak', () => {
    const truth = new GroundTruth();
    const n = node(0, { p0s0: '10.0.0.1', p1s1: '10.0.0.2', p2s2: '10.0.0.3', stray: '10.0.0.4' });
    const auditor = new Auditor([n], truth, 10_000);
    const [quick, slow, held] = [0, 1, 2].map((pod) => truth.newSandbox(pod, 0));
    for (const [i, s] of [quick, slow, held].entries()) if (s !== undefined) truth.markLive(s, `10.0.0.${i + 1}`);
    auditor.check(); // all three seen held
    truth.markGone(quick as NonNullable<typeof quick>, 'del', Date.now());
    truth.markGone(slow as NonNullable<typeof slow>, 'netns', Date.now() - 20_000);
    truth.markGone(held as NonNullable<typeof held>, 'journal', Date.now());
    n.write({ p2s2: '10.0.0.3', stray: '10.0.0.4' });
    auditor.check();
    auditor.final();
    assert.deepEqual(auditor.violations.map((v) => v.what).sort(), [
      'node-0: 10.0.0.3 held by p2s2 (gone) at the end',
      'node-0: 10.0.0.4 held by stray (unknown to the workload) at the end',
      'sandbox p1s1 (gone by netns) released 20000 ms after provable (bound 10000 ms)'.replace(
        '20000',
        String(auditor.latencyOf(slow as NonNullable<typeof slow>)),
      ),
      'sandbox p2s2 (gone by journal) still held at the end',
    ]);
    assert.ok((auditor.latencyOf(quick as NonNullable<typeof quick>) ?? Infinity) < 10_000);
    assert.deepEqual(
      auditor.latencies().map((l) => [l.source, l.count]),
      [
        ['del', 1],
        ['netns', 1],
      ],
    );
  });
});
