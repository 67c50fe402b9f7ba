/**
 * A range served from the pool of a range around it (issue 37: a /26 inside a /24 of one
 * network_name), on a node with no block of that pool: it borrows from the node whose blocks hold
 * the free addresses of its span, and gets every one of them, though that node also has free
 * addresses outside the span (grants it cannot use are kept as idle loans, never handed out by it).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { isWarrenError } from '../../../src/core/errors.ts';
import { owner, rangesOf } from '../../store/tiered/nodes.ts';
import { LendingCluster } from './lending-nodes.ts';

describe('lending to a range inside another range’s pool', () => {
  const clusters: LendingCluster[] = [];
  after(async () => {
    for (const c of clusters) await c.close();
  });
  it('borrows every free address of its span from the node holding them, none outside it', async () => {
    const c = new LendingCluster(['a', 'b']);
    clusters.push(c);
    const outer = rangesOf({ range: '10.60.0.0/24', network_name: 'nb' });
    const inner = rangesOf({ range: '10.60.0.64/26', network_name: 'nb' });
    const a = c.node('a').allocator;
    const b = c.node('b').allocator;
    const held: string[] = [];
    for (let i = 0; i < 254; i++) {
      const [x] = await c.settle(a.allocate({ owner: owner(`a${i}`), ranges: outer }));
      held.push(x?.allocation.address ?? '');
    }
    // a frees 10 addresses in the /26's span and 10 outside it
    let inSpan = 0;
    let outSpan = 0;
    for (let i = 0; i < 254; i++) {
      const n = Number(held[i]?.split('.')[3]);
      const within = n >= 65 && n <= 126;
      if (within && inSpan < 10) {
        await a.release(owner(`a${i}`));
        inSpan++;
      }
      if (!within && outSpan < 10 && n > 130) {
        await a.release(owner(`a${i}`));
        outSpan++;
      }
    }
    let bInner = 0;
    const refusals: string[] = [];
    for (let i = 0; i < 20; i++) {
      try {
        await c.settle(b.allocate({ owner: owner(`bi${i}`), ranges: inner }));
        bInner++;
      } catch (e) {
        if (isWarrenError(e, 'POOL_EXHAUSTED')) {
          refusals.push(e.message);
          break;
        }
        throw e;
      }
    }
    assert.equal(bInner, 10, `every free address of the /26's span, then full: ${refusals.join('; ')}`);
    assert.match(refusals[0] ?? '', /^pool 10\.60\.0\.64\/26@nb has no free address in any of the 1 pools/);
    const handedOut = await c.assertNoDuplicate('10.60.0.0/24@nb');
    const bs = (await c.node('b').store.list()).filter((x) => x.containerID.startsWith('bi'));
    for (const x of bs) {
      const n = Number(x.address.split('.')[3]);
      assert.ok(n >= 65 && n <= 126, `${x.address} is in the /26's span`);
    }
    assert.equal(handedOut.length, 254 - 20 + 10, 'a’s addresses less the 20 it freed, and b’s 10');
  });
});
