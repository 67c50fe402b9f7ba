/**
 * Lending on requests as they change (src/allocator/lending/prompt-lending.ts): on a tier that tells
 * of them, a node with no room gets its grant without any lending round and without its poll: the
 * lender answers the request as it is told of it, the borrower adopts the grant as it is told of
 * it. Real parts: each node a TieredStore on its own SQLite file, one MemoryTier, a ManualClock
 * stepped only by the lender's random moment (JITTER_MS), never by the borrower's poll, and only
 * once the real work before it is done (`promptly`): how far it is stepped never depends on how
 * long that work took.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { FLAGGED_KEPT_MS } from '../../../src/allocator/lending/ask-ending.ts';
import { GIVEN_BACK_GRACE_MS } from '../../../src/allocator/lending/lender.ts';
import { LENT_NETWORK } from '../../../src/allocator/lending/loans.ts';
import { JITTER_MS } from '../../../src/allocator/lending/prompt-lending.ts';
import { quiet } from '../../helpers/event-loop.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { WATCHED_POLL_MS } from '../../../src/allocator/lending/borrower.ts';
import { LendingCluster, STEP_MS, WAIT_MS } from './lending-nodes.ts';

const clusters: LendingCluster[] = [];
const aborts: AbortController[] = [];
after(async () => {
  for (const a of aborts) a.abort();
  for (const c of clusters) await c.close();
});

/** A cluster whose nodes lend promptly until the test ends; what each reported. */
function prompt(names: readonly string[]): { c: LendingCluster; errors: string[]; lent: string[] } {
  const c = new LendingCluster(names);
  clusters.push(c);
  const errors: string[] = [];
  const lent: string[] = [];
  for (const n of c.nodes) {
    const abort = new AbortController();
    aborts.push(abort);
    assert.equal(
      n.allocator.lendPromptly(abort.signal, (l, e) => {
        lent.push(...l);
        errors.push(...e);
      }),
      true,
      'the memory tier tells of requests',
    );
  }
  return { c, errors, lent };
}

/**
 * Drives an ADD that must be answered on the request as it changes: waits until this process is
 * quiet (the borrower asked and waits on the clock, the lender was told and waits its random
 * moment), steps the clock once by the longest such moment, then waits for the ADD with the clock
 * standing still. Its outcome, and how far the clock was stepped in all: the same however long
 * the real work (SQLite commits, their syncs) took.
 */
async function promptly<T>(c: LendingCluster, call: Promise<T>): Promise<{ value: T; steppedMs: number }> {
  let done = false;
  const settled = call.finally(() => {
    done = true;
  });
  settled.catch(() => {});
  const start = c.clock.monotonic();
  await quiet();
  assert.equal(done, false, 'the ADD needed no loan');
  c.clock.advance(JITTER_MS);
  await quiet();
  assert.ok(done, 'the ADD was not answered once the lender had answered, with the clock still');
  return { value: await call, steppedMs: c.clock.monotonic() - start };
}

// One block of 16 for the whole range: the second node must ask the first.
const SMALL = rangesOf({ range: '10.19.0.0/28', block_size: 28 });
const POOL = SMALL[0]?.pool ?? '';

describe('prompt lending: answered as asked, adopted as granted', () => {
  it('serves a node with no room without a lending round and before its first poll', async () => {
    const { c, errors, lent } = prompt(['p1', 'p2']);
    const [first] = await c.node('p1').allocator.allocate({ owner: owner('a0'), ranges: SMALL });
    assert.ok(first, 'p1 claimed the one block');
    const polls = c.tier.calls.get('requestOf') ?? 0;
    const { value, steppedMs } = await promptly(
      c,
      c.node('p2').allocator.allocate({ owner: owner('b0'), ranges: SMALL }),
    );
    const [b] = value;
    assert.ok(b);
    assert.match(b.allocation.pool, /#10\.19\.0\.\d+\/32$/, 'from a loan');
    assert.ok(steppedMs < STEP_MS, `answered within ${steppedMs} ms of the clock: before the 250 ms poll`);
    assert.ok(
      (c.tier.calls.get('requestOf') ?? 0) - polls <= 2,
      'the request read when asking (and adopting), never polled',
    );
    assert.equal(lent.length, 1, 'one address lent');
    assert.deepEqual(errors, []);
    await c.assertNoDuplicate(POOL);
  });

  it('stops when its signal aborts: a request is then answered by the rounds alone', async () => {
    const c = new LendingCluster(['q1', 'q2']);
    clusters.push(c);
    const abort = new AbortController();
    for (const n of c.nodes) n.allocator.lendPromptly(abort.signal, () => {});
    abort.abort();
    assert.equal(c.tier.requestListeners, 0, 'no longer listened to');
    const [first] = await c.node('q1').allocator.allocate({ owner: owner('a0'), ranges: SMALL });
    assert.ok(first);
    const lends = c.tier.calls.get('openRequests') ?? 0;
    const [b] = await c.settle(c.node('q2').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    assert.ok(b);
    assert.ok((c.tier.calls.get('openRequests') ?? 0) > lends, 'answered by a lending round');
    await c.assertNoDuplicate(POOL);
  });

  it('withdraws an ask no ADD waits on any more: grants never adopted go back to their lender (issue 36)', async () => {
    const { c, errors } = prompt(['w1', 'w2']);
    await c.node('w1').allocator.allocate({ owner: owner('a0'), ranges: SMALL });
    await c.node('w2').allocator.allocate({ owner: owner('x'), ranges: rangesOf({ range: '10.20.0.0/24' }) });
    // What an ask whose ADDs were served otherwise, or gave up, leaves: wanted, then granted.
    await c.tier.ask(POOL, 'w2', 3);
    await quiet();
    c.clock.advance(JITTER_MS);
    await quiet();
    assert.equal((await c.tier.requestOf(POOL, 'w2'))?.grants.length, 3, 'granted, never adopted');
    await c.lendAll({ returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 });
    const request = await c.tier.requestOf(POOL, 'w2');
    assert.deepEqual([request?.wanted, request?.grants.length], [0, 0], 'withdrawn by w2’s upkeep');
    await c.lendAll({ returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 }); // w1 sees the grants gone
    c.clock.advance(GIVEN_BACK_GRACE_MS);
    await c.lendAll({ returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 });
    assert.deepEqual(await c.node('w1').store.list({ network: LENT_NETWORK }), [], 'the lender has them back');
    assert.deepEqual(errors, []);
    await c.assertNoDuplicate(POOL);
  });
});

describe('prompt lending: what an asker needs is not kept where no pod uses it (issue 36)', () => {
  it('withdraws the ask as the last ADD waiting in the range gives up, not at the next lending round', async () => {
    const { c, errors } = prompt(['g1', 'g2']);
    for (let i = 0; i < 14; i++) await c.node('g1').allocator.allocate({ owner: owner(`a${i}`), ranges: SMALL });
    const add = c.node('g2').allocator.allocate({ owner: owner('b0'), ranges: SMALL });
    add.catch(() => {});
    await quiet();
    assert.equal((await c.tier.requestOf(POOL, 'g2'))?.wanted, 1, 'asked');
    for (let waited = 0; waited <= WAIT_MS; waited += STEP_MS) {
      c.clock.advance(STEP_MS);
      await quiet();
    }
    await assert.rejects(add, { code: 'POOL_EXHAUSTED' });
    // No lending round ran: a lender told of the request later grants nothing to a node no ADD waits on.
    assert.equal((await c.tier.requestOf(POOL, 'g2'))?.wanted, 0, 'withdrawn as the ADD gave up');
    assert.deepEqual(errors, []);
  });

  it('withdraws the ask as the watch tells of a change once its last ADD ended, not at the next lending round', async () => {
    // Before, a grant written after the ADDs were served (a lender's answer racing another's) and a
    // `wanted` left over stayed in the request until the asker's upkeep round: the address was held
    // for a node no ADD waits on, and an asker elsewhere served up to 10 s late (issue 36's bench).
    const { c, errors } = prompt(['s1', 's2']);
    await c.node('s1').allocator.allocate({ owner: owner('a0'), ranges: SMALL });
    const { value } = await promptly(c, c.node('s2').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    assert.match(value[0]?.allocation.pool ?? '', /#10\.19\.0\.\d+\/32$/, 's2 borrowed');
    const served = await c.tier.requestOf(POOL, 's2');
    assert.ok(served);
    const granted = new Set(served.grants.map((g) => g.address));
    const late = { address: ['10.19.0.13', '10.19.0.14'].find((a) => !granted.has(a)) ?? '', lender: 's1' };
    assert.ok(await c.tier.updateRequest(served, [...served.grants, late], 2), 'a late grant and more wanted');
    await quiet(); // no lending round, the clock standing still
    const request = await c.tier.requestOf(POOL, 's2');
    assert.equal(request?.wanted, 0, 'nothing more wanted');
    assert.deepEqual(
      request?.grants.filter((g) => g.address === late.address),
      [],
      'the grant never adopted flagged given back, and its lender, told, took it back',
    );
    assert.deepEqual(errors, []);
    await c.assertNoDuplicate(POOL);
  });

  it('removes itself a grant flagged given back that its lender did not take back in FLAGGED_KEPT_MS', async () => {
    // The lender an agent older than the flag (a rolling upgrade) or down: before, the flagged grant
    // stood for good, and the lender's placeholder with it; removed, an old lender lets go of it
    // after its grace, as it does of any grant gone.
    const { c, errors } = prompt(['f1']);
    await c.node('f1').allocator.allocate({ owner: owner('x'), ranges: rangesOf({ range: '10.23.0.0/24' }) });
    const asked = await c.tier.ask(POOL, 'f1', 1);
    const flagged = {
      address: '10.19.0.9',
      lender: 'f-old',
      block: '10.19.0.0/28#10.19.0.0/28',
      returned: true as const,
    };
    assert.ok(await c.tier.updateRequest(asked, [flagged], 0));
    await quiet();
    const hour = { returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 };
    const grants = async () => (await c.tier.requestOf(POOL, 'f1'))?.grants ?? [];
    await c.node('f1').allocator.lend(hour);
    assert.deepEqual(await grants(), [flagged], 'its lender may still take it back');
    c.clock.advance(FLAGGED_KEPT_MS - 1);
    await c.node('f1').allocator.lend(hour);
    assert.deepEqual(await grants(), [flagged], 'removed too soon');
    c.clock.advance(1);
    await c.node('f1').allocator.lend(hour);
    assert.deepEqual(await grants(), [], 'removed by the borrower once it stood FLAGGED_KEPT_MS');
    assert.deepEqual(errors, []);
  });

  it('takes back at once the grants of an ask withdrawn, never adopted: flagged given back, not removed', async () => {
    const { c, errors } = prompt(['h1', 'h2']);
    await c.node('h1').allocator.allocate({ owner: owner('a0'), ranges: SMALL });
    await c.node('h2').allocator.allocate({ owner: owner('x'), ranges: rangesOf({ range: '10.21.0.0/24' }) });
    await c.tier.ask(POOL, 'h2', 2);
    await quiet();
    c.clock.advance(JITTER_MS);
    await quiet();
    assert.equal((await c.tier.requestOf(POOL, 'h2'))?.grants.length, 2, 'granted as told, never adopted');
    // h2's round withdraws the ask: h1, told, takes the grants back with the clock standing still.
    const hour = { returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 };
    assert.deepEqual((await c.node('h2').allocator.lend(hour)).errors, []);
    await quiet();
    assert.deepEqual((await c.tier.requestOf(POOL, 'h2'))?.grants, []);
    assert.deepEqual(await c.node('h1').store.list({ network: LENT_NETWORK }), [], 'not kept for any grace');
    assert.deepEqual(errors, []);
    await c.assertNoDuplicate(POOL);
  });

  it('frees a placeholder whose grant it wrote and someone else removed unread after GIVEN_BACK_GRACE_MS', async () => {
    const { c, errors } = prompt(['h3', 'h4']);
    await c.node('h3').allocator.allocate({ owner: owner('a0'), ranges: SMALL });
    await c.node('h4').allocator.allocate({ owner: owner('x'), ranges: rangesOf({ range: '10.21.0.0/24' }) });
    await c.tier.ask(POOL, 'h4', 2);
    await quiet();
    c.clock.advance(JITTER_MS);
    await quiet();
    assert.equal((await c.tier.requestOf(POOL, 'h4'))?.grants.length, 2, 'granted as told, never adopted');
    c.tier.deleteRequest(POOL, 'h4'); // before any round of h3 read the grants it wrote
    await quiet();
    const hour = { returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 };
    await c.node('h3').allocator.lend(hour);
    c.clock.advance(GIVEN_BACK_GRACE_MS - 1);
    await c.node('h3').allocator.lend(hour);
    assert.equal((await c.node('h3').store.list({ network: LENT_NETWORK })).length, 2, 'released too soon');
    c.clock.advance(1);
    await c.node('h3').allocator.lend(hour);
    assert.deepEqual(await c.node('h3').store.list({ network: LENT_NETWORK }), [], 'not kept for the whole grace');
    assert.deepEqual(errors, []);
    await c.assertNoDuplicate(POOL);
  });

  it('gives the idle loans back as its last ADD in the range ends while another node asks there', async () => {
    const { c, errors } = prompt(['e1', 'e2', 'e3']);
    await c.node('e1').allocator.allocate({ owner: owner('a0'), ranges: SMALL });
    const loans: string[] = [];
    for (const b of ['b0', 'b1']) {
      const { value } = await promptly(c, c.node('e2').allocator.allocate({ owner: owner(b), ranges: SMALL }));
      assert.match(value[0]?.allocation.pool ?? '', /#10\.19\.0\.\d+\/32$/, 'e2 borrowed');
      loans.push(value[0]?.allocation.address ?? '');
    }
    // e1 fills the rest of its block: it has nothing more to lend.
    for (let i = 1; i < 12; i++) await c.node('e1').allocator.allocate({ owner: owner(`a${i}`), ranges: SMALL });
    await c.lendAll({ returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 }); // e2 watches the range it borrows in
    const add = c.node('e2').allocator.allocate({ owner: owner('b2'), ranges: SMALL });
    let ended = false;
    add
      .finally(() => {
        ended = true;
      })
      .catch(() => {});
    await quiet();
    assert.equal(ended, false, 'an ADD of e2 waits for grants in the range');
    // Both loans idle while it waits, and another node asks: they are kept, for that ADD.
    for (const b of ['b0', 'b1']) await c.node('e2').allocator.release(owner(b));
    await c.node('e3').allocator.allocate({ owner: owner('x'), ranges: rangesOf({ range: '10.24.0.0/24' }) });
    await c.tier.ask(POOL, 'e3', 1);
    await quiet();
    const loanGrants = async () =>
      ((await c.tier.requestOf(POOL, 'e2'))?.grants ?? []).filter((g) => loans.includes(g.address));
    assert.deepEqual(
      (await loanGrants()).map((g) => g.returned),
      [undefined, undefined],
      'kept while an ADD of e2 is under way in the range',
    );
    // The ADD's look at its request (no hint: a poll) finds a loan idle and takes it; no lending round.
    for (let waited = 0; waited < WATCHED_POLL_MS && !ended; waited += STEP_MS) {
      c.clock.advance(STEP_MS);
      await quiet();
    }
    const [served] = await add;
    assert.ok(served !== undefined && loans.includes(served.allocation.address), 'served from an idle loan');
    await quiet();
    const other = loans.find((a) => a !== served.allocation.address);
    assert.ok(!(await loanGrants()).some((g) => g.address === other), 'the other given back as the ADD ended');
    const lent = (await c.node('e1').store.list({ network: LENT_NETWORK })).map((a) => [a.address, a.node]);
    assert.ok(
      lent.some(([a, n]) => a === other && n === 'e3'),
      `e1 took it back and lent it on to e3, which asks: ${JSON.stringify(lent)}`,
    );
    assert.deepEqual(errors, []);
    await c.assertNoDuplicate(POOL);
  });

  it('gives an idle loan back at once when another node asks in its range, not after the grace', async () => {
    const { c, errors } = prompt(['k1', 'k2', 'k3']);
    await c.node('k1').allocator.allocate({ owner: owner('a0'), ranges: SMALL });
    const { value } = await promptly(c, c.node('k2').allocator.allocate({ owner: owner('b0'), ranges: SMALL }));
    assert.match(value[0]?.allocation.pool ?? '', /#10\.19\.0\.\d+\/32$/, 'k2 borrowed');
    // k1 fills the rest of its block: it has nothing more to lend.
    for (let i = 1; i < 13; i++) await c.node('k1').allocator.allocate({ owner: owner(`a${i}`), ranges: SMALL });
    await c.node('k2').allocator.release(owner('b0'));
    const hour = { returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 };
    await c.lendAll(hour); // k2's loan is idle; its range's open requests are watched from now on
    await c.node('k3').allocator.allocate({ owner: owner('x'), ranges: rangesOf({ range: '10.22.0.0/24' }) });
    await c.tier.ask(POOL, 'k3', 1);
    await quiet();
    await c.lendAll(hour);
    await c.lendAll(hour);
    assert.deepEqual((await c.tier.requestOf(POOL, 'k2'))?.grants, [], 'given back while k3 asks');
    assert.deepEqual(errors, []);
    await c.assertNoDuplicate(POOL);
  });
});
