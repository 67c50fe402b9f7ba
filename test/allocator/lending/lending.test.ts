/**
 * Lending between nodes on the two-tier store (src/allocator/lending/): a node with no room asks the
 * owners through its address request, they lend what the policy allows, and no address is ever held
 * by two nodes. Real parts throughout: each node a TieredStore on its own SQLite file, one
 * MemoryTier for the cluster, the allocator with blocks, a ManualClock.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GIVEN_BACK_GRACE_MS } from '../../../src/allocator/lending/lender.ts';
import { LENT_NETWORK, RETURNED_NETWORK } from '../../../src/allocator/lending/loans.ts';
import { momentOf } from '../../../src/core/moment.ts';
import { isWarrenError } from '../../../src/core/errors.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { flush } from '../../helpers/event-loop.ts';
import { LendingCluster, STEP_MS, WAIT_MS } from './lending-nodes.ts';

const cluster = LendingCluster.closedAfterFile();

// whereabouts' commonest setup: one /28 for every node; block_size 28 makes it one block.
const SMALL = rangesOf({ range: '10.9.0.0/28', block_size: 28 });
const POOL = SMALL[0]?.pool ?? '';

describe('lending: a range smaller than a block, shared by every node', () => {
  it('serves all 14 addresses of a /28 from three nodes, refuses the 15th naming the range, never one twice', async () => {
    const c = cluster(['n1', 'n2', 'n3']);
    const order = ['n1', 'n2', 'n3', 'n2', 'n2', 'n3', 'n1', 'n3', 'n2', 'n1', 'n3', 'n3', 'n2', 'n1'];
    for (const [i, name] of order.entries()) {
      const [a] = await c.settle(c.node(name).allocator.allocate({ owner: owner(`${name}-${i}`), ranges: SMALL }));
      assert.ok(a, `ADD ${i + 1} on ${name}`);
      await c.assertNoDuplicate(POOL);
    }
    const handedOut = await c.assertNoDuplicate(POOL);
    assert.equal(handedOut.length, 14);
    for (const name of ['n1', 'n2', 'n3']) {
      const refused = await c
        .settle(c.node(name).allocator.allocate({ owner: owner(`${name}-15th`), ranges: SMALL }))
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      assert.ok(isWarrenError(refused), `the 15th ADD on ${name} was not refused`);
      assert.equal(refused.code, 'POOL_EXHAUSTED');
      assert.match(refused.message, /10\.9\.0\.0\/28/);
    }
    assert.equal((await c.assertNoDuplicate(POOL)).length, 14);
  });
});

describe('lending: a node with full blocks borrows', () => {
  it('keeps a lent address from its lender: the lender never hands it out', async () => {
    const c = cluster(['lender', 'borrower']);
    const [first] = await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    assert.ok(first);
    const [lent] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    assert.ok(lent);
    assert.match(lent.allocation.pool, /#10\.9\.0\.\d+\/32$/, 'handed out from a loan ledger');
    // The lender fills its block: every other address, never the lent one.
    const mine: string[] = [first.allocation.address];
    for (let i = 1; i < 13; i++) {
      const [a] = await c.node('lender').allocator.allocate({ owner: owner(`l${i}`), ranges: SMALL });
      assert.ok(a);
      mine.push(a.allocation.address);
    }
    assert.ok(!mine.includes(lent.allocation.address), `the lender handed out ${lent.allocation.address}`);
    await assert.rejects(c.node('lender').allocator.allocate({ owner: owner('l13'), ranges: SMALL }), {
      code: 'POOL_EXHAUSTED',
    });
    await c.assertNoDuplicate(POOL);
  });

  it('borrows once its own block is full and no block is free, from the node that has room', async () => {
    const c = cluster(['n1', 'n2']);
    const two = rangesOf({ range: '10.12.0.0/27', block_size: 28 }); // two blocks, 15 addresses each
    const pool = two[0]?.pool ?? '';
    const [a1] = await c.node('n1').allocator.allocate({ owner: owner('a'), ranges: two });
    const [b1] = await c.node('n2').allocator.allocate({ owner: owner('b0'), ranges: two });
    assert.ok(a1 && b1 && a1.allocation.pool !== b1.allocation.pool, 'each node claimed a block');
    let own = 1;
    for (;;) {
      const [b] = await c.settle(c.node('n2').allocator.allocate({ owner: owner(`b${own}`), ranges: two }));
      assert.ok(b);
      own += 1;
      if (b.allocation.pool !== b1.allocation.pool) {
        assert.match(b.allocation.pool, /#10\.12\.0\.\d+\/32$/, 'from a loan');
        const lent = await c.tier.requestOf(pool, 'n2');
        assert.deepEqual(
          lent?.grants.map((g) => [g.address, g.lender, g.block]),
          [[b.allocation.address, 'n1', a1.allocation.pool]],
        );
        break;
      }
      assert.ok(own < 20, 'never borrowed');
    }
    await c.assertNoDuplicate(pool);
  });

  it('hands out a lent address again with no request to the cluster once it is released', async () => {
    const c = cluster(['lender', 'borrower']);
    await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    const [lent] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    assert.ok(lent);
    await c.node('borrower').allocator.release(owner('b0'));
    const calls = [...c.tier.calls.values()].reduce((a, b) => a + b, 0);
    const [again] = await c.node('borrower').allocator.allocate({ owner: owner('b1'), ranges: SMALL });
    assert.equal(again?.allocation.address, lent.allocation.address);
    assert.equal(
      [...c.tier.calls.values()].reduce((a, b) => a + b, 0),
      calls,
      'the loan was used without asking',
    );
  });

  it('answers TRY_AGAIN naming the cluster when no room is left and the cluster cannot be reached', async () => {
    const c = cluster(['lender', 'borrower']);
    await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    c.tier.away = true;
    const error = await c
      .node('borrower')
      .allocator.allocate({ owner: owner('b1'), ranges: SMALL })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    c.tier.away = false;
    assert.ok(isWarrenError(error));
    assert.equal(error.code, 'TRY_AGAIN');
    assert.match(error.message, /memory cluster/);
  });

  it('answers TRY_AGAIN naming the cluster when it goes away while the ADD waits for grants', async () => {
    const c = cluster(['lender', 'borrower']);
    await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    const waiting = c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL });
    const outcome = waiting.then(
      () => undefined,
      (e: unknown) => e,
    );
    await flush(4); // asked; no lender has answered
    assert.equal((await c.tier.requestOf(POOL, 'borrower'))?.wanted, 1);
    c.tier.away = true;
    c.clock.advance(STEP_MS);
    const error = await outcome;
    c.tier.away = false;
    assert.ok(isWarrenError(error));
    assert.equal(error.code, 'TRY_AGAIN');
    assert.match(error.message, /pool 10\.9\.0\.0\/28 has no free address on node borrower.*memory cluster tier/);
  });
});

describe('lending: an owner asked gives an empty block back at once (issue 36)', () => {
  // Four blocks of a /27: .1-.7 (7 addresses), .8-.15, .16-.23, .24-.30.
  const QUARTERS = rangesOf({ range: '10.40.0.0/27', block_size: 29 });
  const pool = QUARTERS[0]?.pool ?? '';
  /** n1 holds one block, emptied (its address released after `cooldownSeconds`); n2 asks for `wanted`. */
  async function emptiedAndAsked(names: [string, string], wanted: number, cooldownSeconds = 0) {
    const c = cluster(names);
    const [a] = await c.node(names[0]).allocator.allocate({ owner: owner('a'), ranges: QUARTERS });
    assert.ok(a);
    await c.node(names[0]).allocator.release(owner('a'), cooldownSeconds);
    await c.tier.ask(pool, names[1], wanted);
    const report = await c.node(names[0]).allocator.lend({ returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 });
    assert.deepEqual(report.errors, []);
    const request = await c.tier.requestOf(pool, names[1]);
    return { c, block: a.allocation.pool, report, request };
  }

  it('gives back a block no larger than what is wanted, and says so in the request', async () => {
    const { c, block, report, request } = await emptiedAndAsked(['g1', 'g2'], 7);
    assert.equal(await c.tier.claimOf(block), undefined, 'given back before its grace');
    assert.deepEqual(report.lent, [`block ${block} given back for g2`]);
    assert.deepEqual([request?.wanted, request?.grants.length], [0, 0], 'answered: nothing more wanted');
    const [got] = await c.settle(c.node('g2').allocator.allocate({ owner: owner('b'), ranges: QUARTERS }));
    assert.equal(got?.allocation.pool, block, 'the asker claims it');
    await c.assertNoDuplicate(pool);
  });

  it('lends from an empty block larger than what is wanted, and keeps it', async () => {
    const { c, block, report, request } = await emptiedAndAsked(['h1', 'h2'], 1);
    assert.equal((await c.tier.claimOf(block))?.node, 'h1');
    assert.equal(report.lent.length, 1);
    assert.deepEqual([request?.wanted, request?.grants.length], [0, 1]);
    await c.assertNoDuplicate(pool);
  });

  it('keeps an empty block whose address still rests after its release', async () => {
    const { c, block, request } = await emptiedAndAsked(['k1', 'k2'], 7, 60);
    assert.equal((await c.tier.claimOf(block))?.node, 'k1', 'the rest is kept: not given back');
    assert.ok(
      (request?.grants ?? []).every((g) => g.address !== '10.40.0.1'),
      'the resting address never lent',
    );
    await c.assertNoDuplicate(pool);
  });
});

describe('lending: loans end', () => {
  it('gives an idle loan back after the grace, and its lender can use the address again', async () => {
    const c = cluster(['lender', 'borrower']);
    await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    const [lent] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    assert.ok(lent);
    await c.node('borrower').allocator.release(owner('b0'));
    const grace = 60_000;
    await c.lendAll({ returnGraceMs: grace, orphanGraceMs: grace });
    c.clock.advance(grace - 1);
    await c.lendAll({ returnGraceMs: grace, orphanGraceMs: grace });
    assert.equal((await c.tier.requestOf(POOL, 'borrower'))?.grants.length, 1, 'given back before the grace');
    c.clock.advance(1);
    await c.lendAll({ returnGraceMs: grace, orphanGraceMs: grace });
    assert.deepEqual(
      (await c.tier.requestOf(POOL, 'borrower'))?.grants.map((g) => [g.address, g.returned]),
      [[lent.allocation.address, true]],
      'the grant is flagged given back',
    );
    // The borrower never hands it out again: its loan ledger carries the given-back mark.
    const marks = await c.node('borrower').store.list({ network: RETURNED_NETWORK });
    assert.deepEqual(
      marks.map((m) => m.address),
      [lent.allocation.address],
    );
    // The lender takes the grant back and releases its placeholder at its next round, without its
    // grace, and can then hand the address out.
    await c.lendAll({ returnGraceMs: grace, orphanGraceMs: grace });
    assert.deepEqual((await c.tier.requestOf(POOL, 'borrower'))?.grants, [], 'the grant is removed');
    assert.deepEqual(await c.node('lender').store.list({ network: LENT_NETWORK }), []);
    const got: string[] = [];
    for (let i = 1; i < 14; i++) {
      const [a] = await c.node('lender').allocator.allocate({ owner: owner(`l${i}`), ranges: SMALL });
      got.push(a?.allocation.address ?? '');
    }
    assert.ok(got.includes(lent.allocation.address), 'the address came back to its lender');
    await c.assertNoDuplicate(POOL);
  });

  it('releases the placeholder of a loan its borrower flagged given back at once, not after a grace (issue 36)', async () => {
    const c = cluster(['lender', 'borrower']);
    await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    const [lent] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    assert.ok(lent);
    const grace = 600_000;
    await c.lendAll({ returnGraceMs: 0, orphanGraceMs: grace }); // the lender sees the grant
    await c.node('borrower').allocator.release(owner('b0'));
    await c.lendAll({ returnGraceMs: 0, orphanGraceMs: grace }); // the borrower marks and flags it
    await c.lendAll({ returnGraceMs: 0, orphanGraceMs: grace }); // the lender takes it back
    assert.deepEqual((await c.tier.requestOf(POOL, 'borrower'))?.grants, [], 'given back');
    assert.deepEqual(await c.node('lender').store.list({ network: LENT_NETWORK }), []);
    await c.assertNoDuplicate(POOL);
  });

  it('runs the block grace from when the block holds only addresses lent out (issue 36)', async () => {
    const c = cluster(['lender', 'borrower']);
    await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    const [lent] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    assert.ok(lent);
    const grace = 300_000;
    await c.node('lender').allocator.release(owner('l0'));
    assert.deepEqual((await c.node('lender').allocator.returnEmptyBlocks(grace)).returned, []);
    c.clock.advance(grace);
    assert.deepEqual((await c.node('lender').allocator.returnEmptyBlocks(grace)).returned, [], 'a loan stands');
    await c.node('borrower').allocator.release(owner('b0'));
    await c.lendAll({ returnGraceMs: 0, orphanGraceMs: grace });
    await c.lendAll({ returnGraceMs: 0, orphanGraceMs: grace });
    c.clock.advance(GIVEN_BACK_GRACE_MS);
    await c.lendAll({ returnGraceMs: 0, orphanGraceMs: grace });
    const { returned } = await c.node('lender').allocator.returnEmptyBlocks(grace);
    assert.equal(returned.length, 1, 'given back as soon as it is empty: unused for the grace already');
    await c.assertNoDuplicate(POOL);
  });

  it('never takes an empty block of one address for an idle loan to give back', async () => {
    // Without block_size a /28 is split into one-address blocks, whose keys look like loans' keys.
    const c = cluster(['n1']);
    const tiny = rangesOf({ range: '10.13.0.0/28' });
    const [a] = await c.node('n1').allocator.allocate({ owner: owner('a'), ranges: tiny });
    assert.match(a?.allocation.pool ?? '', /\/32$/);
    await c.node('n1').allocator.release(owner('a'));
    await c.lendAll({ returnGraceMs: 0 });
    await c.lendAll({ returnGraceMs: 0 });
    assert.deepEqual(await c.node('n1').store.list({ network: RETURNED_NETWORK }), []);
    const [again] = await c.node('n1').allocator.allocate({ owner: owner('b'), ranges: tiny });
    assert.equal(again?.allocation.pool, a?.allocation.pool, 'the block still serves');
  });

  it('never hands an address out twice through a lender killed mid-lend and restarted', async () => {
    const c = cluster(['lender', 'borrower']);
    const [first] = await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    assert.ok(first);
    // Killed after a placeholder for the borrower, before its grant (what #answer commits first).
    const block = first.allocation.pool;
    const read = await c.node('lender').store.readLedger(block);
    assert.equal(read.kind, 'snapshot');
    const orphan = '10.9.0.14';
    const placeholder = {
      ...{ pool: block, address: orphan, network: LENT_NETWORK, containerID: 'borrower', ifname: orphan },
      ...{ node: 'borrower', createdAt: momentOf(c.clock).wall },
    };
    assert.equal(
      (await c.node('lender').store.commit(block, read.revision, [{ op: 'allocate', allocation: placeholder }])).kind,
      'committed',
    );
    const lender = await c.restart('lender');
    const [lent] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    assert.ok(lent);
    assert.notEqual(lent.allocation.address, orphan, 'the orphan is lent to nobody');
    // Killed again after the grant: the placeholder is in its file, the restarted lender keeps it.
    const again = await c.restart('lender');
    assert.notEqual(again, lender);
    const got: string[] = [first.allocation.address];
    for (let i = 1; i < 14; i++) {
      const taken = await again.allocator.allocate({ owner: owner(`l${i}`), ranges: SMALL }).catch(() => []);
      for (const a of taken) got.push(a.allocation.address);
    }
    assert.ok(!got.includes(lent.allocation.address), 'the restarted lender handed the loan out');
    assert.ok(!got.includes(orphan), 'the orphan was handed out before its grace');
    await c.assertNoDuplicate(POOL);
  });

  it('leaves nothing lent for ever after a crash between the placeholder and the grant', async () => {
    const c = cluster(['lender', 'borrower']);
    const [first] = await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    assert.ok(first);
    // What a lender that died after committing a placeholder, before writing the grant, leaves behind.
    const block = first.allocation.pool;
    const read = await c.node('lender').store.readLedger(block);
    assert.equal(read.kind, 'snapshot');
    const placeholder = {
      pool: block,
      address: '10.9.0.14',
      network: LENT_NETWORK,
      containerID: 'borrower',
      ifname: '10.9.0.14',
      node: 'lender',
      createdAt: momentOf(c.clock).wall,
    };
    const committed = await c
      .node('lender')
      .store.commit(block, read.revision, [{ op: 'allocate', allocation: placeholder }]);
    assert.equal(committed.kind, 'committed');
    const grace = 30_000;
    await c.lendAll({ orphanGraceMs: grace });
    c.clock.advance(grace - 1);
    await c.lendAll({ orphanGraceMs: grace });
    assert.equal((await c.node('lender').store.list({ network: LENT_NETWORK })).length, 1, 'released too soon');
    c.clock.advance(1);
    await c.lendAll({ orphanGraceMs: grace });
    assert.deepEqual(await c.node('lender').store.list({ network: LENT_NETWORK }), []);
  });

  it("keeps placeholders and given-back marks out of the node's own allocations, which a runtime resync releases", async () => {
    // The runtime resync (agent/release/pipeline.ts) releases every allocation of this node whose
    // container the runtime does not list: a placeholder or a mark among them would free an address
    // another node holds.
    const c = cluster(['lender', 'borrower']);
    await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    await c.node('borrower').allocator.release(owner('b0'));
    await c.lendAll({ returnGraceMs: 0 }); // marked and flagged given back; the lender's next round takes it back
    assert.equal((await c.node('lender').store.list({ network: LENT_NETWORK })).length, 1);
    assert.equal((await c.node('borrower').store.list({ network: RETURNED_NETWORK })).length, 1);
    for (const name of ['lender', 'borrower']) {
      const own = await c.node(name).store.list({ node: name });
      assert.deepEqual(
        own.filter((a) => a.network === LENT_NETWORK || a.network === RETURNED_NETWORK),
        [],
        `${name}'s own allocations`,
      );
    }
  });

  it('keeps a placeholder whose grant stands, however long', async () => {
    const c = cluster(['lender', 'borrower']);
    await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    await c.lendAll({ orphanGraceMs: 1 });
    c.clock.advance(WAIT_MS * 100);
    await c.lendAll({ orphanGraceMs: 1 });
    assert.equal((await c.node('lender').store.list({ network: LENT_NETWORK })).length, 1);
    await c.assertNoDuplicate(POOL);
  });
});
