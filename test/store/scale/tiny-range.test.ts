/**
 * Issue 36's tiny range at CI size: 20 simulated nodes (bench/scale/: each the agent's own two-tier
 * store with its own client and SQLite file, its allocator and cluster upkeep, default timers)
 * sharing one /26 against the in-process fake API server, one ManualClock for all. The store splits
 * a /26 into one-address blocks (62 of them, 3 a node), which are never lent: only an owner giving
 * an empty one back when asked (allocator/give-back.ts `forRequest`) serves a node with no room.
 * Skewed bursts (80% of the pods on 2 nodes), each past full, then ten minutes idle and a burst that
 * drains the range: no ADD is refused as full while an address of the range is free anywhere, no
 * address is held twice, and after the idle window no more than 1% of the range is stranded.
 *
 * Before the give-back on request (one-address blocks never lent, empty ones held for the 300 s
 * grace), 25 of the 69 refusals were false.
 *
 * The same on a /24, whose blocks are two addresses and grow (up to /27), so addresses are lent:
 * before loans given back were flagged and taken back at once (and asks withdrawn as their last ADD
 * gives up, idle loans given back as another node asks), loans idle at their borrower and
 * placeholders kept 30 s to 300 s after their grant went were free addresses no asker could reach.
 * After ten minutes idle, a grown block of a node with no pod left that still lent addresses in use
 * elsewhere was kept whole (24 of 254 addresses, 9.4%, stranded); one lent to one node only is now
 * handed over to it (src/allocator/lending/handover.ts): what stays stranded is in blocks lent to
 * two or more nodes (7 here, both hot nodes borrowing from one cold node's /29 and /30).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ScaleCluster } from '../../../bench/scale/cluster.ts';
import { generator } from '../../../bench/scale/scenarios.ts';
import { type TinyRangeReport, tinyRange } from '../../../bench/scale/tiny-range.ts';
import { JITTER_MS } from '../../../src/allocator/lending/prompt-lending.ts';

const NODES = 20;

/**
 * Each node's prompt-lending jitter from a generator seeded by its name, not Math.random: which
 * lender of a request answers first is then the same on every run (the grown-block case's outcome
 * hung on it).
 */
function seededJitter(node: string): () => number {
  const random = generator(3_700 + Number(node.replace(/\D/g, '')));
  return () => random() * JITTER_MS;
}

describe(`${NODES} nodes sharing a /26 with skewed bursts (issue 36's tiny range)`, () => {
  let cluster: ScaleCluster;
  let report: TinyRangeReport;
  before(async () => {
    cluster = await ScaleCluster.start({ nodes: NODES, range: '10.36.0.0/26' });
    report = await tinyRange(cluster, { bursts: 4 });
  });
  after(async () => {
    await cluster?.stop();
  });

  it('refuses an ADD as full only when no address of the range is free anywhere', (t) => {
    const { adds, served, exhausted, falseExhaustions, failed, failures } = report;
    t.diagnostic(
      JSON.stringify({ adds, served, exhausted, falseExhaustions, failed, blockPrefix: report.blockPrefix }),
    );
    assert.equal(report.blockPrefix, 32, 'one-address blocks');
    assert.ok(exhausted > 0, 'the bursts took the range past full');
    assert.equal(falseExhaustions, 0);
    assert.deepEqual(failures, []);
    assert.equal(report.drained.free, 0, 'the last burst was handed every free address');
  });

  it('holds no address twice across every node', () => {
    assert.deepEqual(report.duplicates, []);
  });

  it('leaves at most 1% of the range stranded after ten minutes idle', (t) => {
    const { idle, capacity } = report;
    t.diagnostic(JSON.stringify(idle));
    assert.ok(idle.stranded <= capacity / 100, `${idle.stranded} of ${capacity} stranded: ${idle.strandedWhy}`);
  });
});

describe(`${NODES} nodes sharing a /24 whose blocks grow, with skewed bursts (issue 36's tiny range)`, () => {
  let cluster: ScaleCluster;
  let report: TinyRangeReport;
  before(async () => {
    cluster = await ScaleCluster.start({ nodes: NODES, range: '10.37.0.0/24', lendJitter: seededJitter });
    report = await tinyRange(cluster, { bursts: 4 });
  });
  after(async () => {
    await cluster?.stop();
  });

  it('refuses an ADD as full only when no address of the range is free anywhere, loans and all', (t) => {
    const { adds, served, exhausted, falseExhaustions, failed, failures, falseWhere } = report;
    t.diagnostic(JSON.stringify({ adds, served, exhausted, falseExhaustions, failed, falseWhere }));
    assert.equal(report.blockPrefix, 31, 'blocks of two addresses, growing');
    assert.ok(exhausted > 0, 'the bursts took the range past full');
    assert.equal(falseExhaustions, 0, `free addresses at the end of bursts with refusals: ${falseWhere}`);
    assert.deepEqual(failures, []);
    assert.equal(report.drained.free, 0, 'the last burst was handed every free address');
  });

  it('holds no address twice across every node', () => {
    assert.deepEqual(report.duplicates, []);
  });

  it('strands after ten minutes idle only addresses of blocks lent to two or more nodes: one lent to one is handed over', (t) => {
    const { idle, capacity } = report;
    t.diagnostic(JSON.stringify(idle));
    const reasons = idle.strandedWhy.filter((why) => !why.startsWith('e.g.'));
    assert.deepEqual(
      reasons.filter((why) => !/lending to \d+ nodes$/.test(why)),
      [],
      `stranded otherwise: ${idle.strandedWhy.join('; ')}`,
    );
    assert.ok(idle.stranded <= capacity / 20, `${idle.stranded} of ${capacity} stranded: ${idle.strandedWhy}`);
  });
});
