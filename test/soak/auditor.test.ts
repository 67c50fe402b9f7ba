/**
 * The soak's auditor catches what it says it catches, on files written here (the allocations
 * table as the node's SQLite file has it) and a ground truth set by hand: two live sandboxes on
 * one address, a live sandbox's record gone, a gone sandbox still held or released past the
 * bound, a record nobody live holds at the end; a release nothing explains (no release line of
 * its agent, no DEL sent while an agent ran, no file put back), and a release counter below the
 * releases its agent explained. Times are set in the past, not waited for.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, it } from 'node:test';
import { tempDir } from '../helpers/processes.ts';
import { AgentReleaseLog } from './agent-log.ts';
import { type AuditedNode, Auditor, type ReleaseWitness } from './auditor.ts';
import { GroundTruth, type Sandbox } from './ground-truth.ts';
import { type ReleaseEvent, releaseEventOf } from './release-events.ts';
import { EventLosses } from './event-losses.ts';

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

/** The auditor's words for a release nothing explains. */
function unexplained(id: string, address: string, source: string): string {
  return (
    `node-0: sandbox ${id}'s ${address} (gone by ${source}) released without an explanation (no release line of ` +
    'its agent names it, no DEL was sent for it while an agent ran, its file was not put back, its agent was not killed)'
  );
}

/** What a node's witness is told by hand: its agent's log, the DELs sent, its file put back, its counter. */
interface Told {
  readonly log: AgentReleaseLog;
  readonly dels: Array<{ id: string; at: number; incarnation: number; reachable: boolean }>;
  readonly restores: number[];
  readonly kills: number[];
  counter: { incarnation: number; total: number } | string;
  events?: ReleaseEvent[];
  /** What took Events away, as the store tells it (event-losses.ts). */
  readonly eventLosses: EventLosses;
}

/** `node`, with a witness of what `told` says. */
function witnessed(index: number, records: Record<string, string>): ReturnType<typeof node> & { told: Told } {
  const told: Told = {
    log: new AgentReleaseLog(),
    dels: [],
    restores: [],
    kills: [],
    counter: 'not told',
    eventLosses: new EventLosses(),
  };
  const witness: ReleaseWitness = {
    take: (id, address, from, to) => told.log.take(id, address, from, to),
    said: (id, from) => told.log.said(id, from),
    delSent: (id, since) => told.dels.find((d) => d.id === id && d.reachable && d.at >= since),
    forget: () => {},
    restoredWithin: (from, to) => told.restores.some((at) => at >= from && at <= to),
    killedWithin: (from, to) => told.kills.some((at) => at >= from && at <= to),
    starting: () => false,
    releasesCounted: async () => told.counter,
    releaseEvents: async () => told.events,
    eventLostBy: (from, to) => told.eventLosses.lostBy(from, to),
  };
  return { ...node(index, records), witness, told };
}

/**
 * One node's sandbox p0s0 at 10.0.0.1, seen live by the auditor, then proven gone by its netns: the
 * node (its file still holding the record) and the auditor, for a test to say how the release comes.
 */
function sweptOnce(): { n: ReturnType<typeof witnessed>; auditor: Auditor } {
  const truth = new GroundTruth();
  const n = witnessed(0, { p0s0: '10.0.0.1' });
  const auditor = new Auditor([n], truth, 10_000);
  const s = truth.newSandbox(0, 0);
  truth.markLive(s, '10.0.0.1');
  auditor.check();
  truth.markGone(s, 'netns', Date.now());
  return { n, auditor };
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

  it('finds a release nothing explains: no line of its agent, a DEL sent while no agent ran, a line read before its proof', async () => {
    const truth = new GroundTruth();
    const n = witnessed(0, { p0s0: '10.0.0.1', p1s1: '10.0.0.2', p2s2: '10.0.0.3' });
    const auditor = new Auditor([n], truth, 10_000);
    const [silent, journaled, early] = [0, 1, 2].map((pod) => truth.newSandbox(pod, 0)) as [Sandbox, Sandbox, Sandbox];
    for (const [i, s] of [silent, journaled, early].entries()) truth.markLive(s, `10.0.0.${i + 1}`);
    auditor.check();
    const proof = Date.now() - 1_000;
    n.told.log.read(
      1,
      JSON.stringify({ msg: 'released', source: 'netns', containerID: 'p2s2', addresses: ['10.0.0.3'] }),
      proof - 1,
    );
    truth.markGone(silent, 'netns', proof);
    truth.markGone(journaled, 'journal', proof);
    n.told.dels.push({ id: 'p1s1', at: proof, incarnation: 1, reachable: false });
    truth.markGone(early, 'netns', proof);
    n.write({});
    auditor.check();
    assert.equal(auditor.violations.length, 0, 'judged once LATE_MS has passed, or at the end');
    auditor.final();
    await auditor.agentsAtEnd(0);
    // The timings the auditor adds (last seen held, seen released) are this run's: left out here.
    const untimed = (what: string) =>
      what.replace(/; last seen held -?\d+ ms and seen released -?\d+ ms after its proof\)/, ')');
    assert.deepEqual(auditor.violations.map((v) => untimed(v.what)).sort(), [
      unexplained('p0s0', '10.0.0.1', 'netns'),
      unexplained('p1s1', '10.0.0.2', 'journal'),
      unexplained('p2s2', '10.0.0.3', 'netns'),
    ]);
  });

  it('takes as explained a release its agent logged (by container or address), its DEL sent while an agent ran, or its file put back', async () => {
    const truth = new GroundTruth();
    const n = witnessed(0, { p0s0: '10.0.0.1', p1s1: '10.0.0.2', p2s2: '10.0.0.3', p3s3: '10.0.0.4' });
    const auditor = new Auditor([n], truth, 10_000);
    const [swept, journaled, deleted, restored] = [0, 1, 2, 3].map((pod) => truth.newSandbox(pod, 0)) as Sandbox[];
    for (const [i, s] of [swept, journaled, deleted, restored].entries())
      truth.markLive(s as Sandbox, `10.0.0.${i + 1}`);
    auditor.check();
    const proof = Date.now() - 1_000;
    for (const s of [swept, journaled, deleted, restored])
      truth.markGone(s as Sandbox, s === deleted ? 'del' : 'netns', proof);
    n.told.log.read(
      2,
      JSON.stringify({ msg: 'released: network namespace is gone', containerID: 'p0s0', addresses: ['10.0.0.1'] }),
      proof + 1,
    );
    n.told.log.read(2, JSON.stringify({ msg: 'missed delete released', released: ['10.0.0.2'] }), proof + 2);
    n.told.dels.push({ id: 'p2s2', at: proof, incarnation: 2, reachable: true });
    n.told.restores.push(Date.now()); // after the look that saw p3s3 held
    n.write({});
    auditor.check();
    auditor.final();
    assert.deepEqual(auditor.violations, []);
    assert.deepEqual(auditor.explanations().by, { 'netns line': 1, 'journal line': 1, DEL: 1, 'file put back': 1 });
    n.told.counter = { incarnation: 2, total: 3 }; // the two lines and the DEL: the file put back is no agent's
    await auditor.agentsAtEnd();
    assert.deepEqual(auditor.violations, []);
  });

  it("waits at the end for the line of a release the last look saw, still in the agent's pipe", async () => {
    const { n, auditor } = sweptOnce();
    n.write({});
    auditor.check();
    auditor.final();
    const end = auditor.agentsAtEnd(60_000);
    // Read while the end waits (seed 3801 at 100 faults: the last release's line came after the last look).
    const line = { msg: 'released: network namespace is gone', containerID: 'p0s0', addresses: ['10.0.0.1'] };
    n.told.log.read(1, JSON.stringify(line), Date.now());
    await end;
    assert.equal(auditor.violations.length, 0, JSON.stringify(auditor.violations));
    assert.deepEqual(auditor.explanations().by, { 'netns line': 1 });
  });

  it("judges a restored record replaced on its address by another container's by the file check's line, which no release counter counts", async () => {
    const truth = new GroundTruth();
    const n = witnessed(0, { p0s0: '10.0.0.1', p1s1: '10.0.0.2' });
    const auditor = new Auditor([n], truth, 10_000);
    const [restored, swept] = [0, 1].map((pod) => truth.newSandbox(pod, 0)) as [Sandbox, Sandbox];
    truth.markLive(restored, '10.0.0.1');
    truth.markLive(swept, '10.0.0.2');
    auditor.check();
    truth.markGone(restored, 'restored', Date.now());
    truth.markGone(swept, 'netns', Date.now());
    // The file check took the publications' holders over both (src/store/tiered/file-check.ts), and
    // named the first it released (its notice, as the agent logs it).
    n.write({ later1: '10.0.0.1', later2: '10.0.0.2' });
    const msg = 'file check: released the record of container p0s0 (eth0) at 10.0.0.1 in block b: stale, ...';
    n.told.log.read(1, JSON.stringify({ level: 40, msg }), Date.now());
    auditor.check();
    auditor.final();
    // The address stayed in use (the publication's holder has it): the agent's release counter counts none.
    n.told.counter = { incarnation: 1, total: 0 };
    await auditor.agentsAtEnd(0);
    assert.deepEqual(auditor.explanations().by, { 'file-check line': 1 });
    assert.deepEqual(auditor.explanations().counters, [
      'node-0: its last agent counted 0 releases; 0 observed were its',
    ]);
    assert.deepEqual(
      auditor.violations.filter((v) => v.what.includes('without an explanation')).map((v) => v.what.slice(0, 30)),
      ["node-0: sandbox p1s1's 10.0.0."],
    );
  });

  it('judges a gone sandbox its agent writes back from the store released only once its record came back and went again', () => {
    // Found by the soak (kubernetes seed 3839, step 6180): a node back, as a new machine, before any
    // agent could act on its forget. Its empty file held none of its old sandboxes; the first look
    // would have taken each for released before its agent wrote it back and released it (its netns gone).
    const truth = new GroundTruth();
    const n = witnessed(0, {});
    const auditor = new Auditor([n], truth, 10_000);
    /** Pod `pod`'s sandbox seen live at `address`, then gone by a restore, its file empty, the store keeping it. */
    const keptByStore = (pod: number, address: string): Sandbox => {
      const s = truth.newSandbox(pod, 0);
      truth.markLive(s, address);
      n.write({ [s.id]: address });
      auditor.check();
      n.write({});
      truth.markGone(s, 'restored', Date.now() - 1_000);
      s.returning = true;
      auditor.check();
      assert.equal(s.releasedAt, undefined, `${s.id} not released before it came back`);
      return s;
    };
    const netnsLine = (s: Sandbox, incarnation: number) =>
      n.told.log.read(
        incarnation,
        JSON.stringify({ msg: 'released: network namespace is gone', containerID: s.id, addresses: [s.address] }),
        Date.now(),
      );
    const s = keptByStore(0, '10.0.0.1');
    n.write({ [s.id]: '10.0.0.1' }); // written back from the publication at the agent's start
    auditor.check();
    assert.equal(s.returning, undefined);
    n.write({});
    netnsLine(s, 1);
    auditor.check();
    assert.ok(s.releasedAt !== undefined, 'released once gone again');
    // Another, written back and released between two looks (its start's reconcile pass): its line says so.
    const quick = keptByStore(1, '10.0.0.2');
    netnsLine(quick, 2);
    auditor.check();
    assert.ok(quick.releasedAt !== undefined, 'released: its line says so');
    // A third, never written back (its file newer than the publication that still named it): not held.
    keptByStore(2, '10.0.0.3');
    auditor.final();
    assert.deepEqual(auditor.violations, []);
  });

  it('never judges a release late from a put-back its record was not written back at, once nothing held it', () => {
    // etcd seed 3943, step 17053: node 1's file put back while a restored publication still named a
    // sandbox gone long before; its agent kept the file's newer word and gave the block back; the node's
    // directory deleted 23 s later, the store naming it no more; a restore of etcd brought the
    // publication back, and a start wrote it back and released it at once: judged 48.6 s late.
    const truth = new GroundTruth();
    const n = witnessed(0, {});
    const auditor = new Auditor([n], truth, 10_000);
    const s = truth.newSandbox(0, 0);
    truth.markLive(s, '10.0.0.8');
    const now = Date.now();
    truth.markGone(s, 'netns', now - 120_000);
    s.releasedAt = now - 119_000;
    truth.followPutBack(0, new Set(), new Set([s.id]), now - 50_000); // the copy put back: owed again
    assert.equal(s.returning, true);
    auditor.check();
    assert.equal(s.releasedAt, undefined, 'not released before it came back');
    truth.followPutBack(0, new Set(), new Set(), now - 27_000); // deleted: neither file nor store holds it
    n.told.log.read(
      3,
      JSON.stringify({ msg: 'released: network namespace is gone', containerID: s.id, addresses: [s.address] }),
      now,
    ); // written back from the restored publication and released at the start after
    auditor.check();
    auditor.final();
    assert.deepEqual(auditor.violations, []);
    assert.equal(auditor.latencyOf(s), undefined);
    assert.deepEqual([s.returning, s.lostWithDisk, s.releasedAt], [undefined, true, now - 27_000]);
  });

  it('takes a release observed across a kill -9 of its agent as committed before its line could be written', () => {
    const { n, auditor } = sweptOnce();
    n.told.kills.push(Date.now());
    n.write({});
    auditor.check();
    auditor.final();
    assert.equal(auditor.violations.length, 0, JSON.stringify(auditor.violations));
    assert.deepEqual(auditor.explanations().by, { 'agent killed before its line': 1 });
  });

  it('takes a release whose agent was killed just after it as committed with its line still in the buffer', async () => {
    // Found by the short soak (seed 3801): a kill -9 20 ms after the release took its line along.
    const { n, auditor } = sweptOnce();
    n.write({});
    auditor.check();
    n.told.kills.push(Date.now() + 20);
    auditor.final();
    await auditor.agentsAtEnd(0);
    assert.equal(auditor.violations.length, 0, JSON.stringify(auditor.violations));
    assert.deepEqual(auditor.explanations().by, { 'agent killed before its line': 1 });
  });

  it("finds an agent's release counter below the releases observed that it explained, and says when it cannot read one", async () => {
    const truth = new GroundTruth();
    const [n, m] = [witnessed(0, { p0s0: '10.0.0.1', p1s1: '10.0.0.2' }), witnessed(1, {})];
    const auditor = new Auditor([n, m], truth, 10_000);
    const [a, b] = [0, 1].map((pod) => truth.newSandbox(pod, 0)) as [Sandbox, Sandbox];
    truth.markLive(a, '10.0.0.1');
    truth.markLive(b, '10.0.0.2');
    auditor.check();
    const proof = Date.now() - 1_000;
    truth.markGone(a, 'del', proof);
    truth.markGone(b, 'del', proof);
    n.told.dels.push({ id: 'p0s0', at: proof, incarnation: 4, reachable: true });
    n.told.dels.push({ id: 'p1s1', at: proof, incarnation: 4, reachable: true });
    n.write({});
    auditor.check();
    auditor.final();
    n.told.counter = { incarnation: 4, total: 1 };
    m.told.counter = 'its agent is not running';
    await auditor.agentsAtEnd();
    assert.deepEqual(
      auditor.violations.map((v) => v.what),
      ["node-0: its agent's warren_releases_total says 1, but 2 of its releases were observed"],
    );
    assert.deepEqual(auditor.explanations().counters, [
      'node-0: its last agent counted 1 releases; 2 observed were its',
      'node-1: not read (its agent is not running)',
    ]);
  });

  it('says how many of the releases its agents logged have their Event on the pod', async () => {
    const truth = new GroundTruth();
    const n = witnessed(0, { p0s0: '10.0.0.1', p1s1: '10.0.0.2' });
    const auditor = new Auditor([n], truth, 10_000);
    const [told, untold] = [0, 1].map((pod) => truth.newSandbox(pod, 0)) as [Sandbox, Sandbox];
    truth.markLive(told, '10.0.0.1');
    truth.markLive(untold, '10.0.0.2');
    auditor.check();
    const proof = Date.now() - 1_000;
    truth.markGone(told, 'netns', proof);
    truth.markGone(untold, 'netns', proof);
    for (const [id, address] of [
      ['p0s0', '10.0.0.1'],
      ['p1s1', '10.0.0.2'],
    ])
      n.told.log.read(
        1,
        JSON.stringify({ msg: 'released', source: 'kubernetes', containerID: id, addresses: [address] }),
        proof + 1,
      );
    n.told.events = [
      releaseEventOf({ message: 'released 10.0.0.1: pod deleted', involvedObject: { name: 'pod-0' } }),
      releaseEventOf({ message: 'released 10.0.0.2: pod deleted', involvedObject: { name: 'pod-7' } }),
    ];
    n.write({});
    auditor.check();
    auditor.final();
    await auditor.agentsAtEnd();
    assert.equal(auditor.violations.length, 0, JSON.stringify(auditor.violations));
    assert.equal(
      auditor.explanations().events,
      '1 of the 2 releases its agents logged have their Event on the pod; 1 missing, taken by: none; ' +
        '1 explained by no fault: p1s1 (pod-1 10.0.0.2)',
    );
  });

  it('puts each missing Event down to the fault its sending falls in, and names those no fault explains', async () => {
    // The kubernetes store's soak had 44 of 270 releases' Events: every missing one sent after the
    // snapshot an API restore went back to, or while the API server was away.
    const truth = new GroundTruth();
    const nodes = [witnessed(0, { p0s0: '10.0.0.1' }), witnessed(1, { p1s1: '10.0.0.2' })];
    const auditor = new Auditor(nodes, truth, 10_000);
    const sandboxes = nodes.map((_, i) => truth.newSandbox(i, i));
    sandboxes.forEach((s, i) => truth.markLive(s, `10.0.0.${i + 1}`));
    auditor.check();
    const proof = Date.now() - 1_000;
    sandboxes.forEach((s, i) => {
      truth.markGone(s, 'netns', proof);
      const line = { msg: 'released', source: 'netns', containerID: s.id, addresses: [`10.0.0.${i + 1}`] };
      nodes[i]?.told.log.read(1, JSON.stringify(line), proof + 1);
      nodes[i]?.write({});
    });
    auditor.check();
    // Node 0's release fell between a snapshot and the restore that went back to it; node 1's in no fault.
    nodes[0]?.told.eventLosses.snapshot(proof - 10);
    nodes[0]?.told.eventLosses.restored(Date.now() + 1);
    for (const n of nodes) n.told.events = [];
    auditor.final();
    await auditor.agentsAtEnd();
    assert.equal(
      auditor.explanations().events,
      '0 of the 2 releases its agents logged have their Event on the pod; 2 missing, taken by: the API server ' +
        'restored from an older snapshot 1; 1 explained by no fault: p1s1 (pod-1 10.0.0.2)',
    );
  });
});
