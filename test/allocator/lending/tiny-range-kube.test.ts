/**
 * A range too small to lend from (issue 36: "a tiny range, every address usable"), on the
 * Kubernetes tier through the fake API server: without block_size a /27 is split into one-address
 * blocks, which are never lent (a loan's key would be the block's). Before, a node whose blocks
 * were full was refused at once while another node held a block it had just emptied (through a
 * real Multus: 307 s, until the 300 s block grace gave it back). Now the owner of an empty block
 * gives it back as soon as another node asks (allocator/give-back.ts `forRequest`), the asker's
 * wait ends on its request's answer and it claims the block, within one lending round or, with
 * prompt lending, one watch event; and a lender stopped between giving the block back and writing
 * the request leaves a free block, never an address on two nodes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JITTER_MS } from '../../../src/allocator/lending/prompt-lending.ts';
import { quiet } from '../../helpers/event-loop.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { kubeLending } from './kube-sessions.ts';
import { LendingCluster, STEP_MS, WAIT_MS } from './lending-nodes.ts';

const { fakeReady, clusters, aborts, session } = kubeLending();

/**
 * Two nodes sharing `cidr` (a /27: 30 one-address blocks), each holding 15 of them; then `b`
 * releases one of its addresses: its block is empty, still claimed. Answers the address freed.
 */
async function sharedAndFull(c: LendingCluster, cidr: string): Promise<{ freed: string; pool: string }> {
  const ranges = rangesOf({ range: cidr });
  for (const name of ['a', 'b'])
    for (let i = 0; i < 15; i++) await c.node(name).allocator.allocate({ owner: owner(`${name}${i}`), ranges });
  const [freed] = await c.node('b').allocator.release(owner('b7'));
  assert.ok(freed, 'b released one of its addresses');
  return { freed: freed.address, pool: ranges[0]?.pool ?? '' };
}

describe('a range of one-address blocks shared by two nodes (issue 36, Kubernetes tier)', () => {
  it("serves a node with no room from the block another node just emptied, in one lending round, not after b's grace", async () => {
    const c = await LendingCluster.open(['a', 'b'], session);
    clusters.push(c);
    const { freed, pool } = await sharedAndFull(c, '10.36.0.0/27');
    const ranges = rangesOf({ range: '10.36.0.0/27' });
    const start = c.clock.monotonic();
    const [got] = await c.settle(c.node('a').allocator.allocate({ owner: owner('a-16th'), ranges }));
    assert.equal(got?.allocation.address, freed, 'the address b freed');
    assert.ok(c.clock.monotonic() - start <= STEP_MS, `served within ${c.clock.monotonic() - start} ms of clock`);
    assert.equal((await c.cluster.claimOf(got?.allocation.pool ?? ''))?.node, 'a', 'the block is a’s now');
    assert.equal((await c.assertNoDuplicate(pool)).length, 30);
  });

  it('is served on the watch with no lending round, within the lender’s random moment', {
    timeout: 60_000,
  }, async () => {
    const c = await LendingCluster.open(['a', 'b'], session);
    clusters.push(c);
    for (const n of c.nodes) {
      const abort = new AbortController();
      aborts.push(abort);
      assert.ok(n.allocator.lendPromptly(abort.signal, (_, errors) => assert.deepEqual(errors, [])));
    }
    const { freed, pool } = await sharedAndFull(c, '10.37.0.0/27');
    const ranges = rangesOf({ range: '10.37.0.0/27' });
    let done = false;
    const call = c.node('a').allocator.allocate({ owner: owner('a-16th'), ranges });
    call.then(
      () => (done = true),
      () => (done = true),
    );
    // The watch events come over real sockets: the clock is stepped by a tenth of the lender's
    // moment once the process is quiet, and a few real milliseconds are left for the events.
    const start = c.clock.monotonic();
    while (!done && c.clock.monotonic() - start < 500) {
      await quiet();
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (!done) c.clock.advance(JITTER_MS / 10);
    }
    assert.ok(done, 'not served within 500 ms of clock');
    const [got] = await call;
    assert.equal(got?.allocation.address, freed);
    // Below the borrower's poll on a watch (WATCHED_POLL_MS) and the lender's rounds: told, not polled.
    assert.ok(c.clock.monotonic() - start <= 2 * JITTER_MS, `served in ${c.clock.monotonic() - start} ms of clock`);
    assert.equal((await c.assertNoDuplicate(pool)).length, 30);
  });

  it('leaves no duplicate and still serves when the lender stops between giving the block back and writing the request', {
    timeout: 60_000,
  }, async () => {
    const fake = await fakeReady;
    const c = await LendingCluster.open(['a', 'b'], session);
    clusters.push(c);
    const { freed, pool } = await sharedAndFull(c, '10.38.0.0/27');
    const ranges = rangesOf({ range: '10.38.0.0/27' });
    // a asks (its request is created), then no request can be updated: b's answer gives the block
    // back and fails to write, as a lender killed between its two writes.
    let done = false;
    const call = c.node('a').allocator.allocate({ owner: owner('a-16th'), ranges });
    call.then(
      () => (done = true),
      () => (done = true),
    );
    await quiet();
    fake.forbid('update', 'warrenaddressrequests');
    try {
      const report = await c.node('b').allocator.lend({ returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 });
      assert.equal(report.errors.length, 1, 'the request could not be written');
      assert.equal(done, false, 'a still waits: its request never said so');
      for (let waited = 0; !done && waited <= WAIT_MS; waited += STEP_MS) {
        c.clock.advance(STEP_MS);
        await quiet();
      }
    } finally {
      fake.allow('update', 'warrenaddressrequests');
    }
    const [got] = await call;
    assert.equal(got?.allocation.address, freed, 'found by the look before refusing');
    const held = (await c.node('a').store.list({ rangePool: pool })).map((x) => x.address);
    assert.equal(held.length, 16);
    assert.ok(held.includes(freed));
  });
});
