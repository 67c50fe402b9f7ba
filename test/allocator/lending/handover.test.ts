/**
 * A block handed over to its borrower (src/allocator/lending/handover.ts, src/store/tiered/handover.ts):
 * a lender that holds nothing of its own in a block any more, every address in use in which is lent
 * to one node, hands the block over to it; and a node stopped between any two of the handover's
 * writes leaves no address on two nodes and none lost. Real parts: each node a TieredStore on its
 * own SQLite file, one MemoryTier, the allocator with blocks, a ManualClock.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RETURNED_NETWORK, LENT_NETWORK } from '../../../src/allocator/lending/loans.ts';
import { OFFER_WAIT_MS } from '../../../src/allocator/lending/handover.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { MemoryTier } from '../../store/tiered/memory-tier.ts';
import { LendingCluster } from './lending-nodes.ts';

const cluster = LendingCluster.closedAfterFile();

// One /28 block of 14 addresses for every node.
const SMALL = rangesOf({ range: '10.9.0.0/28', block_size: 28 });
const POOL = SMALL[0]?.pool ?? '';
const GRACE = 300_000;

/** A lender whose block holds only one loan, in use by the borrower's pod `b0`: the block and that address. */
async function lentOnly(c: LendingCluster): Promise<{ block: string; address: string }> {
  const [first] = await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
  assert.ok(first);
  const [lent] = await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
  assert.ok(lent);
  assert.match(lent.allocation.pool, /\/32$/, 'a loan');
  await c.node('lender').allocator.release(owner('l0'));
  return { block: first.allocation.pool, address: lent.allocation.address };
}

/** One lending round of `name` at the block grace, its errors answered. */
async function round(c: LendingCluster, name: string): Promise<string[]> {
  const report = await c.node(name).allocator.lend({ returnGraceMs: GRACE, orphanGraceMs: GRACE });
  return report.errors;
}

/** Rounds of both nodes and their claim checks, `times` over. */
async function rounds(c: LendingCluster, times = 2): Promise<void> {
  for (let i = 0; i < times; i++) {
    await c.lendAll({ returnGraceMs: GRACE, orphanGraceMs: GRACE });
    for (const n of c.nodes) await n.store.check();
  }
}

/** The handover done: the block is the borrower's, its pod's allocation in it, nothing left of the loan. */
async function assertHandedOver(c: LendingCluster, block: string, address: string): Promise<void> {
  const claim = await c.tier.claimOf(block);
  assert.equal(claim?.node, 'borrower');
  assert.equal(claim?.offeredTo, undefined);
  assert.equal(claim?.takenFrom, undefined);
  const [pod] = await c.node('borrower').store.findByOwner(owner('b0'));
  assert.deepEqual([pod?.pool, pod?.address], [block, address], "the pod's address, now in the borrower's block");
  assert.deepEqual((await c.tier.requestOf(POOL, 'borrower'))?.grants ?? [], [], 'no grant left');
  assert.deepEqual(await c.node('lender').store.list({ network: LENT_NETWORK }), [], 'no placeholder left');
  assert.equal(
    (await c.node('borrower').store.list({ network: RETURNED_NETWORK })).length,
    1,
    'the loan ledger is marked given back',
  );
  await c.node('lender').store.ping(); // not halted: the lender let go of the block, never claimed it again
  await c.assertNoDuplicate(POOL);
}

/** No address held by two pods, across the nodes (mid-handover, a grant may outlive its placeholder). */
async function assertNoPodTwice(c: LendingCluster): Promise<void> {
  const held = (await c.everything()).filter((a) => !a.network.startsWith('warren.dev/'));
  const addresses = held.map((a) => a.address);
  assert.equal(new Set(addresses).size, addresses.length, `held twice: ${addresses.join(', ')}`);
}

/** Every address of the /28 handed out once between the two nodes: none lost, none twice. */
async function assertAllUsable(c: LendingCluster): Promise<void> {
  const free = 14 - (await c.everything()).filter((a) => !a.network.startsWith('warren.dev/')).length;
  const got = new Set<string>();
  for (let i = 1; i < 40 && got.size < free; i++) {
    const name = i % 2 === 0 ? 'lender' : 'borrower';
    const taken = await c
      .settle(c.node(name).allocator.allocate({ owner: owner(`fill${i}`), ranges: SMALL }))
      .catch(() => []);
    for (const a of taken) got.add(a.allocation.address);
  }
  assert.equal(got.size, free, 'every address left is handed out');
  await c.assertNoDuplicate(POOL);
}

describe('lending: a block holding only one node’s loans is handed over to it (issue 36)', () => {
  it('hands the block over after the grace: the loan becomes the borrower’s allocation in it, the lender lets go', async () => {
    const c = cluster(['lender', 'borrower']);
    const { block, address } = await lentOnly(c);
    await rounds(c, 1);
    assert.equal((await c.tier.claimOf(block))?.node, 'lender', 'kept during the grace');
    c.clock.advance(GRACE);
    await rounds(c);
    await assertHandedOver(c, block, address);
    // The borrower hands out the block's other addresses as its own, with no request to the cluster.
    const [next] = await c.node('borrower').allocator.allocate({ owner: owner('b1'), ranges: SMALL });
    assert.equal(next?.allocation.pool, block);
    await assertAllUsable(c);
  });

  it('never hands over a block its lender still uses, nor one lent to two nodes', async () => {
    const c = cluster(['lender', 'borrower', 'other']);
    const [first] = await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges: SMALL });
    assert.ok(first);
    await c.settle(c.node('borrower').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    await rounds(c, 1);
    c.clock.advance(GRACE);
    await rounds(c);
    assert.equal((await c.tier.claimOf(first.allocation.pool))?.node, 'lender', 'its lender uses it');
    await c.settle(c.node('other').allocator.allocate({ owner: owner('o0'), ranges: SMALL }));
    await c.node('lender').allocator.release(owner('l0'));
    await rounds(c, 1);
    c.clock.advance(GRACE);
    await rounds(c);
    const claim = await c.tier.claimOf(first.allocation.pool);
    assert.deepEqual([claim?.node, claim?.offeredTo], ['lender', undefined], 'lent to two nodes: kept');
    await c.assertNoDuplicate(POOL);
  });

  it('is not taken by a borrower none of whose loans of the block is in use (it would only sit idle there)', async () => {
    const c = cluster(['lender', 'borrower']);
    const { block } = await lentOnly(c);
    await rounds(c, 1);
    c.clock.advance(GRACE);
    await c.node('borrower').allocator.release(owner('b0'));
    await rounds(c, 1); // the loan stays (idle for less than its grace); the block is offered
    assert.equal((await c.tier.claimOf(block))?.offeredTo, 'borrower', 'offered');
    await rounds(c);
    const claim = await c.tier.claimOf(block);
    assert.deepEqual([claim?.node, claim?.takenFrom], ['lender', undefined], 'not taken');
    await c.assertNoDuplicate(POOL);
  });

  it('keeps the block grace running through an offer declined: the block goes back as soon as its loan does', async () => {
    const c = cluster(['lender', 'borrower']);
    const { block } = await lentOnly(c);
    await rounds(c, 1);
    assert.deepEqual((await c.node('lender').allocator.returnEmptyBlocks(GRACE)).returned, []);
    c.clock.advance(GRACE);
    await c.node('borrower').allocator.release(owner('b0'));
    assert.deepEqual(await round(c, 'lender'), []);
    assert.equal((await c.tier.claimOf(block))?.offeredTo, 'borrower', 'offered');
    // The give-back looks while the block is offered (not this node's to use then).
    assert.deepEqual((await c.node('lender').allocator.returnEmptyBlocks(GRACE)).returned, []);
    await rounds(c, 2); // declined (the loan is idle), taken back
    const claim = await c.tier.claimOf(block);
    assert.deepEqual([claim?.node, claim?.offeredTo], ['lender', undefined], 'declined and taken back');
    assert.deepEqual((await c.node('lender').allocator.returnEmptyBlocks(GRACE)).returned, [], 'a loan stands');
    for (let i = 0; i < 3; i++) await c.lendAll({ returnGraceMs: 0, orphanGraceMs: GRACE }); // the loan goes back
    assert.deepEqual(await c.node('lender').store.list({ network: LENT_NETWORK }), []);
    const { returned } = await c.node('lender').allocator.returnEmptyBlocks(GRACE);
    assert.deepEqual(returned, [block], 'unused for the grace already: given back at once');
    await c.assertNoDuplicate(POOL);
  });

  it('takes an offer back that its borrower never takes (an older agent), and uses the block again', async () => {
    const c = cluster(['lender', 'borrower']);
    const { block } = await lentOnly(c);
    await round(c, 'lender');
    c.clock.advance(GRACE);
    assert.deepEqual(await round(c, 'lender'), []);
    assert.equal((await c.tier.claimOf(block))?.offeredTo, 'borrower', 'offered');
    // Offered: the lender hands out nothing in it (another node's ADD there would be served by a loan).
    assert.equal(
      (await c.node('lender').store.ledgers(`${POOL}#`)).find((p) => p.ledger === block)?.affinity,
      undefined,
    );
    c.clock.advance(OFFER_WAIT_MS);
    assert.deepEqual(await round(c, 'lender'), []);
    const claim = await c.tier.claimOf(block);
    assert.deepEqual([claim?.node, claim?.offeredTo], ['lender', undefined], 'taken back');
    const [again] = await c.node('lender').allocator.allocate({ owner: owner('l1'), ranges: SMALL });
    assert.equal(again?.allocation.pool, block, 'its own block again');
    await c.assertNoDuplicate(POOL);
  });
});

/**
 * The crash points (tiered/handover.ts): the write after step `k` throws, as a process killed there
 * would stop; the node is then restarted on its file and the rounds go on. What must hold at every
 * point: no address on two nodes, the block's pod keeps its address, and in the end the handover is
 * done and every address of the range usable.
 */
describe('lending: a handover stopped between any two writes (issue 36)', () => {
  /** Makes the next call of `method` on `target` (matching `when`) throw, as a kill there would. */
  function failOnce<T extends object>(target: T, method: keyof T & string, when: (...args: never[]) => boolean): void {
    const original = target[method] as (...args: unknown[]) => unknown;
    let done = false;
    (target as Record<string, unknown>)[method] = function (this: unknown, ...args: unknown[]) {
      if (!done && when(...(args as never[]))) {
        done = true;
        return Promise.reject(new Error(`killed before ${method}`));
      }
      return original.apply(this, args);
    };
  }

  const points: ReadonlyArray<{
    readonly name: string;
    readonly who: 'lender' | 'borrower';
    readonly arm: () => void;
  }> = [
    {
      name: 'after the offer, before the grants are flagged',
      who: 'lender',
      arm: () =>
        failOnce(MemoryTier.prototype, 'updateRequest', (...args: never[]) =>
          (args[1] as unknown as ReadonlyArray<{ offered?: true }>).some((g) => g.offered === true),
        ),
    },
    {
      name: 'after the claim is taken, before the local commit',
      who: 'borrower',
      arm: () => failOnce(SqliteStore.prototype, 'commitAll', () => true),
    },
    {
      name: 'after the local commit, before the claim is settled',
      who: 'borrower',
      arm: () =>
        failOnce(
          MemoryTier.prototype,
          'moveClaim',
          (...args: never[]) => (args[0] as unknown as { takenFrom?: string }).takenFrom !== undefined,
        ),
    },
    {
      name: 'after the claim is settled, before the grants are dropped',
      who: 'borrower',
      arm: () =>
        failOnce(
          MemoryTier.prototype,
          'updateRequest',
          (...args: never[]) =>
            (args[0] as unknown as { node: string; grants: ReadonlyArray<{ offered?: true }> }).grants.some(
              (g) => g.offered === true,
            ) && (args[1] as unknown as readonly unknown[]).length === 0,
        ),
    },
  ];

  for (const point of points) {
    it(`leaves no duplicate and nothing lost when a node stops ${point.name}`, async () => {
      const saved = {
        update: MemoryTier.prototype.updateRequest,
        move: MemoryTier.prototype.moveClaim,
        commitAll: SqliteStore.prototype.commitAll,
      };
      const c = cluster(['lender', 'borrower']);
      try {
        const { block, address } = await lentOnly(c);
        await rounds(c, 1);
        c.clock.advance(GRACE);
        point.arm();
        // The lender offers; the borrower takes; the write armed throws in one of them.
        const errors = [...(await round(c, 'lender')), ...(await round(c, 'borrower'))];
        assert.ok(
          errors.some((e) => e.includes('killed before')),
          `the armed write failed: ${errors.join('; ')}`,
        );
        // Restarted, as an agent starts: its store publishes every block it holds (reading its claims).
        await (await c.restart(point.who)).store.flush();
        // Restarted: the pod keeps its address, nobody hands it out, and nothing of the block twice.
        await c.node('lender').store.check();
        await c.node('borrower').store.check();
        await assertNoPodTwice(c);
        const [pod] = await c.node('borrower').store.findByOwner(owner('b0'));
        assert.equal(pod?.address, address);
        // The rounds go on: the handover is finished (or started again) and every address usable.
        await rounds(c, 3);
        await assertHandedOver(c, block, address);
        await assertAllUsable(c);
      } finally {
        MemoryTier.prototype.updateRequest = saved.update;
        MemoryTier.prototype.moveClaim = saved.move;
        SqliteStore.prototype.commitAll = saved.commitAll;
      }
    });
  }
});
