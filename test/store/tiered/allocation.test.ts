/**
 * Allocation on the two-tier store (src/store/tiered/store.ts) through the allocator: what an ADD
 * asks of the cluster, claims racing between nodes, and block sizes decided with the cluster.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { isWarrenError } from '../../../src/core/errors.ts';
import { type IPAddress, parseIP } from '../../../src/ipam/address.ts';
import { blockCidrOfKey } from '../../../src/ipam/blocks.ts';
import { type TieredCluster, owner, rangesOf, tieredCluster } from './nodes.ts';

const clusters: TieredCluster[] = [];
function cluster(names: readonly string[]): TieredCluster {
  const c = tieredCluster(names);
  clusters.push(c);
  return c;
}
after(async () => {
  for (const c of clusters) await c.close();
});

describe('TieredStore: the common ADD and DEL', () => {
  it('make no request to the cluster in an own block, and go on while the cluster is away', async () => {
    const { nodes, tier, calls } = cluster(['n1']);
    const [n1] = nodes;
    assert.ok(n1);
    const r = rangesOf({ range: '10.7.0.0/16' });
    await n1.allocator.allocate({ owner: owner('first'), ranges: r }); // pins the range, claims a block
    const before = calls();
    for (let i = 0; i < 5; i++) await n1.allocator.allocate({ owner: owner(`c${i}`), ranges: r });
    await n1.allocator.release(owner('c0'));
    assert.equal(calls() - before, 0, `requests: ${JSON.stringify([...tier.calls])}`);
    tier.away = true;
    const away = await n1.allocator.allocate({ owner: owner('while-away'), ranges: r });
    assert.equal(away[0]?.allocation.pool, `${r[0]?.pool}#10.7.0.0/26`);
    assert.equal((await n1.allocator.release(owner('c1'))).length, 1);
    tier.away = false;
  });

  it("reads only this node's claims at the first ADD of a range, the range's claims once its blocks are full", async () => {
    const { nodes, tier } = cluster(['n1', 'n2']);
    const [n1, n2] = nodes;
    assert.ok(n1 && n2);
    // A /24 without block_size is split into /31 blocks: two addresses each.
    const r = rangesOf({ range: '10.8.0.0/24' });
    await n2.allocator.allocate({ owner: owner('other'), ranges: r });
    const listed = () => tier.calls.get('claimsIn') ?? 0;
    const start = listed();
    const a = await n1.allocator.allocate({ owner: owner('a'), ranges: r });
    assert.equal(listed() - start, 1, 'no own block yet: placement reads the range once');
    assert.equal(blockCidrOfKey(a[0]?.allocation.pool ?? ''), '10.8.0.2/31');
    await n1.allocator.allocate({ owner: owner('b'), ranges: r });
    assert.equal(listed() - start, 1, 'room in the own block: the range is not read');
    await n1.allocator.allocate({ owner: owner('c'), ranges: r });
    assert.equal(listed() - start, 2, 'own block full: the range is read again');
  });
});

describe('TieredStore: a block claimed', () => {
  it('costs at most four requests once the range is known: its claims listed, its publication read, the block claimed and published', async () => {
    const { nodes, tier, calls } = cluster(['n1']);
    const [n1] = nodes;
    assert.ok(n1);
    const r = rangesOf({ range: '10.14.0.0/24', block_size: 30 });
    for (const id of ['a', 'b', 'c']) await n1.allocator.allocate({ owner: owner(id), ranges: r }); // fills .1-.3
    const before = calls();
    const [d] = await n1.allocator.allocate({ owner: owner('d'), ranges: r });
    assert.equal(blockCidrOfKey(d?.allocation.pool ?? ''), '10.14.0.4/30');
    // The fourth is the block's publication, written before its first address (claim-announcements.ts).
    assert.ok(calls() - before <= 4, `requests: ${calls() - before} ${JSON.stringify([...tier.calls])}`);
  });
});

describe('TieredStore: nodes sharing a range', () => {
  it('lets one of two nodes racing for a block claim it, and names the winner to the other', async () => {
    const { nodes, tier } = cluster(['n1', 'n2']);
    const [n1, n2] = nodes;
    assert.ok(n1 && n2);
    const key = '10.9.0.0/24#10.9.0.0/26';
    const results = await Promise.all([
      n1.store.commit(key, 0, [{ op: 'claim', node: 'n1' }]),
      n2.store.commit(key, 0, [{ op: 'claim', node: 'n2' }]),
    ]);
    const won = results.flatMap((res, i) => (res.kind === 'committed' ? [`n${i + 1}`] : []));
    assert.equal(won.length, 1);
    const lost = results.find((res) => res.kind === 'conflict');
    assert.match(lost?.kind === 'conflict' ? lost.reason : '', new RegExp(`claimed by node ${won[0]}`));
    assert.equal((await tier.claimOf(key))?.node, won[0]);
  });

  it('never gives one address twice across two nodes allocating at once, every address of the range', async () => {
    const { nodes, tier } = cluster(['n1', 'n2']);
    const [n1, n2] = nodes;
    assert.ok(n1 && n2);
    const r = rangesOf({ range: '10.10.0.0/27' }); // 30 addresses, single-address blocks
    const given = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const [a] = await (i % 2 === 0 ? n1 : n2).allocator.allocate({ owner: owner(`p${i}`), ranges: r });
        return a?.allocation.address;
      }),
    );
    assert.equal(new Set(given).size, 30, 'no address twice');
    // Each address lies in a block its node claimed.
    for (const n of [n1, n2])
      for (const a of await n.store.list({ rangePool: r[0]?.pool }))
        assert.equal((await tier.claimOf(a.pool))?.node, n.name, a.pool);
  });

  it('keeps the block size the cluster pinned: a default adopts it, a different block_size is refused', async () => {
    const { nodes } = cluster(['n1', 'n2', 'n3']);
    const [n1, n2, n3] = nodes;
    assert.ok(n1 && n2 && n3);
    await n1.allocator.allocate({ owner: owner('a'), ranges: rangesOf({ range: '10.11.0.0/24', block_size: 28 }) });
    await assert.rejects(
      n2.allocator.allocate({ owner: owner('b'), ranges: rangesOf({ range: '10.11.0.0/24', block_size: 27 }) }),
      (e: unknown) => isWarrenError(e, 'INVALID_CONFIG') && /split into \/28 blocks/.test(e.message),
    );
    const c = await n3.allocator.allocate({ owner: owner('c'), ranges: rangesOf({ range: '10.11.0.0/24' }) });
    assert.equal(blockCidrOfKey(c[0]?.allocation.pool ?? ''), '10.11.0.16/28');
  });

  it('refuses an allocation in a block of another node, naming why', async () => {
    const { nodes } = cluster(['n1', 'n2']);
    const [n1, n2] = nodes;
    assert.ok(n1 && n2);
    const r = rangesOf({ range: '10.12.0.0/24', block_size: 28 });
    const [held] = await n1.allocator.allocate({ owner: owner('a'), ranges: r });
    assert.ok(held);
    await n2.allocator.allocate({ owner: owner('b'), ranges: r }); // n2 knows the range is split
    const read = await n2.store.readLedger(held.allocation.pool);
    const result = await n2.store.commit(held.allocation.pool, read.revision, [
      { op: 'allocate', allocation: { ...held.allocation, address: '10.12.0.5', containerID: 'x', node: 'n2' } },
    ]);
    assert.equal(result.kind, 'conflict');
    assert.match(result.kind === 'conflict' ? result.reason : '', /is not claimed by node n2/);
  });

  it('never removes a claim made again by another node after its own vanished (ABA)', async () => {
    const { nodes, tier } = cluster(['n1', 'n2']);
    const [n1, n2] = nodes;
    assert.ok(n1 && n2);
    const key = '10.13.0.0/24#10.13.0.0/26';
    const claimed = await n1.store.commit(key, 0, [{ op: 'claim', node: 'n1' }]);
    assert.equal(claimed.kind, 'committed');
    tier.deleteClaim(key, { publication: true }); // and its publication, which would keep n2 off
    assert.equal((await n2.store.commit(key, 0, [{ op: 'claim', node: 'n2' }])).kind, 'committed');
    const back = await n1.store.commit(key, claimed.kind === 'committed' ? claimed.revision : 0, [{ op: 'unclaim' }]);
    assert.equal(back.kind, 'conflict');
    assert.equal((await tier.claimOf(key))?.node, 'n2');
  });
});

function ip(text: string): IPAddress {
  const parsed = parseIP(text);
  assert.ok(parsed, text);
  return parsed;
}

describe('TieredStore: a requested address', () => {
  it('claims the free block that holds it, then hands it out', async () => {
    const { nodes } = cluster(['n1']);
    const [n1] = nodes;
    assert.ok(n1);
    const r = rangesOf({ range: '10.21.0.0/24', block_size: 28 });
    const [a] = await n1.allocator.allocate({ owner: owner('asks'), ranges: r, requested: [ip('10.21.0.77')] });
    assert.equal(a?.allocation.address, '10.21.0.77');
    assert.equal(blockCidrOfKey(a?.allocation.pool ?? ''), '10.21.0.64/28');
  });

  it("is refused by name, not retried until TRY_AGAIN, when it lies in another node's block", async () => {
    const { nodes } = cluster(['n1', 'n2']);
    const [n1, n2] = nodes;
    assert.ok(n1 && n2);
    const r = rangesOf({ range: '10.22.0.0/24', block_size: 28 });
    await n2.allocator.allocate({ owner: owner('holder'), ranges: r, requested: [ip('10.22.0.5')] });
    await assert.rejects(
      n1.allocator.allocate({ owner: owner('wants'), ranges: r, requested: [ip('10.22.0.9')] }),
      (error: unknown) =>
        isWarrenError(error, 'ADDRESS_UNAVAILABLE') && /block 10\.22\.0\.0\/28 .* held by node n2/.test(error.message),
    );
  });
});
