/**
 * Lending and holdings on watches, not polls (issue 36; src/allocator/lending/watched-requests.ts,
 * src/allocator/holdings/watched-holdings.ts), on the Kubernetes tier through the fake API server,
 * which counts every request by verb, resource and query: an idle node's rounds make no LIST of
 * WarrenAddressRequests or WarrenAddressHoldings; a request is answered from its watch event with
 * no round; a watch answered 410 Gone lists once; a watch cut loses nothing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JITTER_MS } from '../../../src/allocator/lending/prompt-lending.ts';
import type { FakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { waitFor } from '../../helpers/processes.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { kubeLending } from './kube-sessions.ts';
import { LendingCluster } from './lending-nodes.ts';

const { fakeReady, clusters, aborts, session } = kubeLending();

const GRACE = 60_000;
const UPKEEP_MS = 10_000;
const WATCHED = ['warrenaddressrequests', 'warrenaddressholdings'];

/** The LISTs of requests and holdings the fake served since it was last cleared. */
function lists(fake: FakeKubeApi): string[] {
  return fake.requests
    .filter((q) => q.verb === 'list' && WATCHED.includes(q.resource ?? ''))
    .map((q) => `${q.resource} ${q.query.labelSelector ?? ''}`);
}

/** A lender holding the one block of a /28 and a borrower, both lending promptly (their watches open). */
async function pair(range: string): Promise<{ c: LendingCluster; pool: string; ranges: ReturnType<typeof rangesOf> }> {
  const ranges = rangesOf({ range, block_size: 28 });
  const c = await LendingCluster.open(['lender', 'borrower'], session);
  clusters.push(c);
  for (const n of c.nodes) {
    const abort = new AbortController();
    aborts.push(abort);
    assert.equal(
      n.allocator.lendPromptly(abort.signal, () => {}),
      true,
    );
  }
  assert.ok((await c.node('lender').allocator.allocate({ owner: owner('l0'), ranges }))[0], 'the lender claimed');
  return { c, pool: ranges[0]?.pool ?? '', ranges };
}

/** One upkeep round of every node (lending and holdings), the clock moved on by the upkeep's interval. */
async function upkeep(c: LendingCluster): Promise<void> {
  for (const n of c.nodes) {
    const report = await n.allocator.lend({ returnGraceMs: GRACE, orphanGraceMs: GRACE });
    assert.deepEqual(report.errors, []);
    assert.deepEqual((await n.allocator.holdings.run(GRACE)).errors, []);
  }
  c.clock.advance(UPKEEP_MS);
}

/** Waits until every node's rounds read watches only: a round that makes no LIST. */
async function synced(c: LendingCluster, fake: FakeKubeApi): Promise<void> {
  await waitFor('the watches synced', async () => {
    fake.clearRequests();
    await upkeep(c);
    return lists(fake).length === 0 ? true : undefined;
  });
}

describe('lending and holdings on watches (Kubernetes tier, fake API server)', () => {
  it('makes no LIST of requests or holdings in an idle window of upkeep rounds', async () => {
    const fake = await fakeReady;
    const { c } = await pair('10.31.0.0/28');
    await synced(c, fake);
    fake.clearRequests();
    for (let i = 0; i < 12; i++) await upkeep(c); // two minutes of rounds on the clock
    assert.deepEqual(lists(fake), [], 'no periodic LIST');
    const writes = fake.requests.filter((q) => q.verb !== 'get' && q.verb !== 'list' && q.verb !== 'watch');
    assert.deepEqual(
      writes.filter((q) => WATCHED.includes(q.resource ?? '')),
      [],
      'nothing written: nothing changed',
    );
  });

  it('answers a request from its watch event, with no lending round and no LIST', async () => {
    const fake = await fakeReady;
    const { c, ranges } = await pair('10.31.1.0/28');
    await synced(c, fake);
    fake.clearRequests();
    let done = false;
    const add = c
      .node('borrower')
      .allocator.allocate({ owner: owner('b0'), ranges })
      .finally(() => {
        done = true;
      });
    add.catch(() => {});
    // Only the lender's random moment is stepped: no round runs, the borrower's wait reads its view.
    await waitFor('the ADD answered', () => {
      if (!done) c.clock.advance(JITTER_MS);
      return done ? true : undefined;
    });
    const [b] = await add;
    assert.ok(b);
    assert.match(b.allocation.pool, /#10\.31\.1\.\d+\/32$/, 'from a loan');
    assert.deepEqual(lists(fake), [], 'answered without a LIST');
    await c.assertNoDuplicate(ranges[0]?.pool ?? '');
  });

  it('lists once when its watch is answered 410 Gone, and reads the copy after', async () => {
    const fake = await fakeReady;
    const { c } = await pair('10.31.2.0/28');
    await synced(c, fake);
    fake.clearRequests();
    fake.expireNextWatch();
    fake.breakWatches();
    await waitFor('a watch listed again', () => {
      c.clock.advance(1_000);
      return lists(fake).length > 0 ? true : undefined;
    });
    await waitFor('every watch open again', () => {
      c.clock.advance(1_000);
      return WATCHED.every((r) => fake.watchCount(r) > 0) ? true : undefined;
    });
    for (let i = 0; i < 3; i++) await upkeep(c);
    assert.equal(lists(fake).length, 1, `one listing, after the 410: ${lists(fake).join('; ')}`);
  });

  it('loses nothing across a watch cut: a request made while it was down is answered from the watch', async () => {
    const fake = await fakeReady;
    const { c, pool } = await pair('10.31.3.0/28');
    await synced(c, fake);
    fake.clearRequests();
    fake.breakWatches();
    await c.cluster.ask(pool, 'asker', 1); // made while the watches are cut (their 1 s pause on the clock)
    await waitFor('granted from the watch, with no round', async () => {
      c.clock.advance(JITTER_MS);
      const request = await c.cluster.requestOf(pool, 'asker');
      return request !== undefined && request.grants.length === 1 ? true : undefined;
    });
    assert.deepEqual(lists(fake), [], 'resumed from the version reached: no LIST');
  });
});
