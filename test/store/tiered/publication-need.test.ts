/**
 * When a block's change needs a write (src/store/tiered/publication-need.ts), pure: the addresses a
 * publication announces follow the picker's order, and a change its publication covers waits.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { type WrittenBlock, aheadOf, ownerOf, publicationNeed } from '../../../src/store/tiered/publication-need.ts';

const KEY = '10.70.0.0/24#10.70.0.0/28';

function allocation(address: string, containerID = `c-${address}`, network = 'net'): Allocation {
  return { pool: KEY, address, network, containerID, ifname: 'eth0', node: 'n1', createdAt: 0 };
}

function written(allocations: Allocation[], ahead: string[]): WrittenBlock {
  return { owners: new Map(allocations.map((a) => [a.address, ownerOf(a)])), ahead: new Set(ahead), atMs: 0 };
}

const ip = (n: number) => `10.70.0.${n}`;

describe('aheadOf', () => {
  it('lists the next free addresses after the cursor, wrapping to the block start, as the picker goes', () => {
    const occupied = new Set([ip(14), ip(1)]);
    assert.deepEqual(aheadOf(KEY, ip(12), occupied, 4), [ip(13), ip(15), ip(0), ip(2)]);
  });

  it("keeps within the range's first and last address (the network address is never announced)", () => {
    const span = { first: ip(1), last: ip(14) };
    assert.deepEqual(aheadOf(KEY, ip(13), new Set(), 3, span), [ip(14), ip(1), ip(2)]);
  });

  it('starts at the block start without a cursor, and is capped by what the block has free', () => {
    const occupied = new Set(Array.from({ length: 14 }, (_, i) => ip(i)));
    assert.deepEqual(aheadOf(KEY, undefined, occupied, 8), [ip(14), ip(15)]);
    assert.deepEqual(aheadOf(KEY, undefined, new Set(), 0), []);
  });
});

describe('publicationNeed', () => {
  const a1 = allocation(ip(1));
  const ahead = [ip(2), ip(3), ip(4), ip(5), ip(6), ip(7), ip(8), ip(9)];
  const fresh = (from: number) => Array.from({ length: 8 }, (_, i) => ip(from + i));

  it('writes a block never written since start', () => {
    assert.equal(publicationNeed(undefined, { allocations: [], ahead: [] }), 'write');
  });

  it('lets an ADD of an announced address settle', () => {
    const now = { allocations: [a1, allocation(ip(2))], ahead: fresh(3) };
    assert.equal(publicationNeed(written([a1], ahead), now), 'settle');
  });

  it('lets a release settle, and needs nothing when nothing changed', () => {
    assert.equal(publicationNeed(written([a1], ahead), { allocations: [], ahead }), 'settle');
    assert.equal(publicationNeed(written([a1], ahead), { allocations: [a1], ahead }), 'none');
  });

  it('writes an address taken outside what was announced (a requested IP)', () => {
    const now = { allocations: [a1, allocation(ip(12))], ahead };
    assert.equal(publicationNeed(written([a1], ahead), now), 'write');
  });

  it('writes a listed address handed to another owner, or moved to another network namespace', () => {
    const now = { allocations: [allocation(ip(1), 'another')], ahead };
    assert.equal(publicationNeed(written([a1], ahead), now), 'write');
    const moved = { allocations: [{ ...a1, netns: '/run/netns/again' }], ahead };
    assert.equal(publicationNeed(written([a1], ahead), moved), 'write');
  });

  it('writes a bookkeeping record at once, even on an announced address (a loan, a holding)', () => {
    const now = { allocations: [a1, allocation(ip(2), 'n2', 'warren.dev/lent')], ahead: fresh(3) };
    assert.equal(publicationNeed(written([a1], ahead), now), 'write');
  });

  it('writes when fewer than a quarter of the announced addresses are left', () => {
    const taken = (n: number) => [a1, ...ahead.slice(0, n).map((address) => allocation(address))];
    assert.equal(publicationNeed(written([a1], ahead), { allocations: taken(6), ahead: fresh(8) }), 'settle');
    assert.equal(publicationNeed(written([a1], ahead), { allocations: taken(7), ahead: fresh(9) }), 'write');
  });
});
