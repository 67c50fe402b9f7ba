/**
 * Where a migrated address (a grant of lender `whereabouts` naming its pod) is recorded on its
 * pod's node: in its block, claimed for that node when nobody holds it, never as a placeholder the
 * node lends to itself; and a lending round adopting such grants completes while an ADD of the same
 * range waits for other nodes' grants (the wait holds no lock the round needs).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { LENT_NETWORK, MIGRATION_LENDER } from '../../../src/allocator/lending/loans.ts';
import { flush } from '../../helpers/event-loop.ts';
import { HANG_BOUND_MS } from '../../helpers/processes.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { LendingCluster, recordMigrated } from './lending-nodes.ts';

const clusters: LendingCluster[] = [];
after(async () => {
  for (const c of clusters) await c.close();
});

const SMALL = rangesOf({ range: '10.12.0.0/28', block_size: 28 });
const POOL = SMALL[0]?.pool ?? '';
const BLOCK = `${POOL}#10.12.0.0/28`;
const LONG = { returnGraceMs: 3_600_000, orphanGraceMs: 3_600_000 };

/** What the migration writes for a pod on `node` holding `address` under whereabouts. */
async function migrate(c: LendingCluster, node: string, address: string, pod: string): Promise<void> {
  await recordMigrated(c, POOL, { node, address, pod });
}

/** `call`, or a failure naming `what` once HANG_BOUND_MS of real time passed without an answer. */
async function bounded<T>(what: string, call: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} never completed`)), HANG_BOUND_MS);
  });
  try {
    return await Promise.race([call, hang]);
  } finally {
    clearTimeout(timer);
  }
}

describe('lending: migrated addresses in their blocks', () => {
  it("are recorded by the claim of their block as their pod's allocation, never a placeholder lent to itself", async () => {
    const c = new LendingCluster(['n1', 'n2']);
    clusters.push(c);
    await migrate(c, 'n2', '10.12.0.5', 'web-0');
    // n2's first ADD claims the block before any lending round adopted the grant.
    const [first] = await c.node('n2').allocator.allocate({ owner: owner('p0'), ranges: SMALL });
    assert.notEqual(first?.allocation.address, '10.12.0.5');
    assert.deepEqual(await c.node('n2').store.list({ network: LENT_NETWORK }), []);
    const [held] = await c.node('n2').allocator.held(owner('sandbox-web-0'));
    assert.equal(held?.pool, BLOCK);
    assert.equal(held?.podName, 'web-0');
    // The next round finds it in its block: the grant has done its work and goes.
    await c.lendAll();
    assert.deepEqual((await c.tier.requestOf(POOL, 'n2'))?.grants, []);
    // The pod's release frees it for good: no round records it again, and the next ADD may have it.
    await c.node('n2').allocator.release({ network: 'net', containerID: 'sandbox-web-0' });
    await c.lendAll();
    assert.deepEqual(await c.node('n2').allocator.held(owner('sandbox-web-0')), []);
    await c.assertNoDuplicate(POOL);
  });

  it("take over, in their block's claim, a loan ledger's record made before the split was known: never a claim refused for good", async () => {
    const c = new LendingCluster(['n1', 'n2']);
    clusters.push(c);
    await migrate(c, 'n2', '10.12.0.5', 'web-0');
    // n2's round adopts the grant before n2 served the range: into the address's loan ledger.
    await c.lendAll();
    const held = async () =>
      (await c.node('n2').allocator.held(owner('sandbox-web-0'))).map((a) => `${a.pool} ${a.address}`);
    assert.deepEqual(await held(), [`${POOL}#10.12.0.5/32 10.12.0.5`]);
    // n2's first ADD claims the block holding it. The pod may hold one address of the range, so
    // the claim recording it in the block while the loan ledger still did was refused, every try.
    const [first] = await c.settle(c.node('n2').allocator.allocate({ owner: owner('p0'), ranges: SMALL }));
    assert.equal(first?.allocation.pool, BLOCK);
    assert.notEqual(first?.allocation.address, '10.12.0.5');
    assert.deepEqual(await held(), [`${BLOCK} 10.12.0.5`], 'recorded once, in its block, from the claim on');
    await c.lendAll();
    assert.deepEqual(await held(), [`${BLOCK} 10.12.0.5`]);
    await c.assertNoDuplicate(POOL);
  });

  it('are recorded in the block their node already holds, never as a placeholder lent to itself', async () => {
    const c = new LendingCluster(['n1', 'n2']);
    clusters.push(c);
    // n2 holds the block before the migration records an address in it for one of its pods.
    await c.node('n2').allocator.allocate({ owner: owner('p0'), ranges: SMALL });
    await migrate(c, 'n2', '10.12.0.9', 'web-1');
    await c.lendAll();
    assert.deepEqual(await c.node('n2').store.list({ network: LENT_NETWORK }), []);
    const records = await c.node('n2').store.list({ address: '10.12.0.9' });
    assert.deepEqual(
      records.map((a) => [a.pool, a.podName]),
      [[BLOCK, 'web-1']],
    );
    for (let i = 1; i < 13; i++) {
      const [a] = await c.node('n2').allocator.allocate({ owner: owner(`p${i}`), ranges: SMALL });
      assert.notEqual(a?.allocation.address, '10.12.0.9');
    }
    await c.assertNoDuplicate(POOL);
  });

  it("in another node's block of one address are refused by name, never adopted under the block's own key", async () => {
    const c = new LendingCluster(['n1', 'n2']);
    clusters.push(c);
    // No block_size: the /28 is split into blocks of one address on this store.
    const tiny = rangesOf({ range: '10.13.0.0/28' });
    const pool = tiny[0]?.pool ?? '';
    const request = await c.tier.ask(pool, 'n2', 0);
    const holder = {
      pool,
      address: '10.13.0.9',
      network: 'net',
      containerID: 'sandbox-web-3',
      ifname: 'eth0',
      node: 'n2',
    };
    const grant = { address: '10.13.0.9', lender: MIGRATION_LENDER, holder: { ...holder, createdAt: c.clock.now() } };
    assert.ok(await c.tier.updateRequest(request, [grant], 0));
    // n2 serves the range (it knows the split); n1 then claims every other block, .9's among them.
    await c.node('n2').allocator.allocate({ owner: owner('b0'), ranges: tiny });
    const got: string[] = [];
    for (let i = 0; i < 12; i++) {
      const [a] = await c.node('n1').allocator.allocate({ owner: owner(`a${i}`), ranges: tiny });
      got.push(a?.allocation.address ?? '');
    }
    assert.ok(!got.includes('10.13.0.9'), got.join(' '));
    const placeholders = await c.node('n1').store.list({ network: LENT_NETWORK });
    assert.deepEqual(
      placeholders.map((p) => [p.address, p.containerID]),
      [['10.13.0.9', 'n2']],
    );
    const report = await c.node('n2').allocator.lend(LONG);
    assert.equal(report.adopted, 0);
    assert.match(
      report.errors.join('\n'),
      /migrated address 10\.13\.0\.9 .* not adopted on node n2: its block is one address/,
    );
    assert.deepEqual(await c.node('n2').store.list({ address: '10.13.0.9' }), []);
    // Told once; the address stays held by n1 for the pod.
    assert.deepEqual((await c.node('n2').allocator.lend(LONG)).errors, []);
    assert.equal((await c.node('n1').store.list({ network: LENT_NETWORK })).length, 1);
  });

  it('are adopted by a lending round that completes while an ADD of their range waits for grants', async () => {
    const c = new LendingCluster(['n1', 'n2']);
    clusters.push(c);
    await migrate(c, 'n2', '10.12.0.7', 'web-2');
    // n1 claims the range's one block (holding the migrated address for n2) and fills it but for two.
    for (let i = 0; i < 11; i++) await c.node('n1').allocator.allocate({ owner: owner(`a${i}`), ranges: SMALL });
    const taken = new Set((await c.node('n1').store.list()).map((a) => a.address));
    const free = Array.from({ length: 14 }, (_, i) => `10.12.0.${i + 1}`).filter((a) => !taken.has(a));
    assert.equal(free.length, 2, `n1 holds ${[...taken].join(' ')}`);
    // n2 has no room: its ADD asks the owners and waits for grants (no lending round of n1 runs yet).
    const waiting = c.node('n2').allocator.allocate({ owner: owner('b0'), ranges: SMALL });
    waiting.catch(() => undefined);
    const end = Date.now() + HANG_BOUND_MS;
    while ((await c.tier.requestOf(POOL, 'n2'))?.wanted !== 1) {
      assert.ok(Date.now() < end, "n2's ADD never asked for addresses");
      await flush(2);
    }
    // n2's round adopts the migrated address while the ADD still waits (the clock stands still).
    const report = await bounded("n2's lending round", c.node('n2').allocator.lend(LONG));
    assert.deepEqual(report.errors, []);
    assert.equal(report.adopted, 1);
    const [adopted] = await c.node('n2').allocator.held(owner('sandbox-web-2'));
    assert.equal(adopted?.address, '10.12.0.7');
    // n1 then lends n2 one of its free addresses: the waiting ADD gets it, never the migrated one.
    const [got] = await c.settle(waiting);
    assert.ok(free.includes(got?.allocation.address ?? ''), got?.allocation.address);
    await c.assertNoDuplicate(POOL);
  });
});

describe('lending: migrated addresses in blocks that grew', () => {
  const GROWING = rangesOf({ range: '10.13.0.0/24' }); // no block_size: /31 blocks growing up to /27
  const GROWING_POOL = GROWING[0]?.pool ?? '';

  it("are adopted as loans when another node's grown block holds them, not claimed again and again", async () => {
    const c = new LendingCluster(['n1', 'n2']);
    clusters.push(c);
    // A burst on n1 claims one block large enough for all of it: a grown block, not a /31.
    const burst = await Promise.all(
      Array.from({ length: 12 }, (_, i) => c.node('n1').allocator.allocate({ owner: owner(`b${i}`), ranges: GROWING })),
    );
    const grown = burst[0]?.[0]?.allocation.pool ?? '';
    assert.match(grown, /\/(2[7-9]|30)$/, `a grown block (${grown})`);
    const used = new Set(burst.map((a) => a[0]?.allocation.address));
    // An address of that block past its smallest /31, free on n1, recorded by a migration for n2's pod.
    const [base = '', prefix = ''] = grown.split('#')[1]?.split('/') ?? [];
    const last = Number(base.split('.')[3]) + 2 ** (32 - Number(prefix)) - 1;
    const address = `10.13.0.${last}`;
    assert.ok(!used.has(address), `${address} is free on n1`);
    await c.node('n2').allocator.allocate({ owner: owner('n2-first'), ranges: GROWING }); // n2 knows the split
    await recordMigrated(c, GROWING_POOL, { node: 'n2', address, pod: 'web-9' });
    for (let round = 0; round < 3; round++) await c.lendAll();
    const [held] = await c.node('n2').allocator.held(owner('sandbox-web-9'));
    assert.equal(held?.address, address, "n2 holds its pod's migrated address");
    assert.equal((await c.tier.claimOf(`${GROWING_POOL}#${address}/31`))?.node, undefined, 'no /31 claimed inside');
    await c.assertNoDuplicate(GROWING_POOL);
  });
});
