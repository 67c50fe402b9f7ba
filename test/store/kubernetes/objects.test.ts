/**
 * Warren's custom resources on the wire (src/store/kubernetes/objects.ts) and Lease times
 * (lease-membership.ts): what is written reads back, what Warren did not write reads as nothing,
 * and a block's publication stays within the API server's object size limit.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import type { PublishedBlock } from '../../../src/store/tiered/cluster-tier.ts';
import { blockKey } from '../../../src/ipam/blocks.ts';
import { microTime, parseMicroTime } from '../../../src/store/kubernetes/lease-objects.ts';
import {
  MAX_ITEMS,
  PUBLICATION_BUDGET_BYTES,
  blockObject,
  claimOfObject,
  publicationObject,
  publishedOf,
  rangeOf,
  requestObject,
  requestOf,
} from '../../../src/store/kubernetes/objects.ts';

const key = blockKey('10.0.0.0/16@net', '10.0.64.0/20');
const meta = { uid: 'u-1', resourceVersion: '42' };

function allocation(i: number, extra: Partial<Allocation> = {}): Allocation {
  return {
    pool: key,
    address: `10.0.${64 + (i >> 8)}.${i & 255}`,
    network: 'net',
    containerID: `container-${i}`.padEnd(64, '0'),
    ifname: 'eth0',
    node: 'n1',
    createdAt: 1_700_000_000_000 + i,
    createdStamp: { boot: 'b', at: i },
    ...extra,
  } as Allocation;
}

/** A block object (the claim) as the API server answers it. */
function stored(): unknown {
  const object = blockObject('x', key, 'n1');
  return { ...object, metadata: { ...object.metadata, ...meta } };
}

/** A publication's spec as written, and whether its allocations were cut. */
function publication(block: PublishedBlock): { spec: Record<string, unknown>; truncated: boolean } {
  const { object, truncated } = publicationObject('x', block);
  return { spec: object.spec as Record<string, unknown>, truncated };
}

/** A publication as the API server answers it. */
function storedPublication(spec: unknown): unknown {
  const { object } = publicationObject('x', {
    key,
    node: 'n1',
    counts: { allocated: 0, resting: 0 },
    allocations: [],
    publishedAt: 1,
  });
  return { ...object, metadata: { ...object.metadata, ...meta }, spec };
}

describe('block objects', () => {
  it('read back as the claim and the publication written', () => {
    const allocations = [allocation(1, { podNamespace: 'ns', podName: 'p', podUID: 'uid', netns: '/var/run/netns/x' })];
    const { spec, truncated } = publication({
      key,
      node: 'n1',
      counts: { allocated: 1, resting: 2 },
      publishedAt: 7,
      allocations,
    });
    assert.equal(truncated, false);
    assert.deepEqual(claimOfObject(stored()), { key, node: 'n1', uid: 'u-1', version: '42' });
    const { createdStamp: _stamp, ...kept } = allocations[0] as Allocation;
    assert.deepEqual(publishedOf(storedPublication(spec)), {
      key,
      node: 'n1',
      counts: { allocated: 1, resting: 2 },
      publishedAt: 7,
      allocations: [kept],
    });
  });

  it('read as nothing when never published, or not written by Warren', () => {
    assert.equal(publishedOf(stored()), undefined, 'a claim is no publication');
    assert.equal(claimOfObject({ metadata: { name: 'x', ...meta }, spec: { pool: 'p' } }), undefined);
    assert.equal(
      rangeOf({ spec: { pool: 'p', space: 's', subnet: 'x', first: 'a', last: 'b', blockPrefix: -1 } }),
      undefined,
    );
  });

  it('keep a publication within the size budget: network namespaces first, then what does not fit', () => {
    const netns = `/var/run/netns/${'n'.repeat(400)}`;
    const many = Array.from({ length: MAX_ITEMS }, (_, i) => allocation(i, { netns }));
    const dropped = publication({
      key,
      node: 'n1',
      counts: { allocated: MAX_ITEMS, resting: 0 },
      publishedAt: 1,
      allocations: many,
    });
    assert.equal(dropped.truncated, false);
    const entries = dropped.spec.allocations as Array<Record<string, unknown>>;
    assert.equal(entries.length, MAX_ITEMS);
    assert.ok(
      entries.every((e) => e.netns === undefined),
      'network namespaces left out',
    );
    assert.ok(JSON.stringify(dropped.spec).length <= PUBLICATION_BUDGET_BYTES + 200);

    const huge = Array.from({ length: MAX_ITEMS }, (_, i) =>
      allocation(i, { podName: 'p'.repeat(250), podNamespace: 'n'.repeat(250) }),
    );
    const cut = publication({
      key,
      node: 'n1',
      counts: { allocated: MAX_ITEMS, resting: 0 },
      publishedAt: 1,
      allocations: huge,
    });
    assert.equal(cut.truncated, true);
    assert.ok((cut.spec.allocations as unknown[]).length < MAX_ITEMS);
    assert.ok(JSON.stringify(cut.spec).length <= PUBLICATION_BUDGET_BYTES + 200);
    assert.equal(cut.spec.allocated, MAX_ITEMS, 'the counts still say what the block holds');
  });
});

describe('request objects', () => {
  it('read back with their grants, a holder with the request range and node', () => {
    const holder: Allocation = {
      pool: 'r',
      address: '10.0.0.9',
      network: 'net',
      containerID: 'c',
      ifname: 'eth0',
      node: 'asker',
      createdAt: 5,
      podUID: 'u',
    };
    const grants = [
      { address: '10.0.0.5', lender: 'n2', block: key },
      { address: '10.0.0.9', lender: 'whereabouts', holder },
    ];
    const object = requestObject('x', { pool: 'r', node: 'asker', wanted: 2, grants });
    assert.equal(object.metadata.labels?.['warren.dev/open'], 'true');
    assert.equal(object.metadata.labels?.['lender.warren.dev/n2'], 'true');
    const read = requestOf({ ...object, metadata: { ...object.metadata, ...meta } });
    assert.deepEqual(read, { pool: 'r', node: 'asker', wanted: 2, grants, version: '42' });
    assert.equal(
      requestObject('x', { pool: 'r', node: 'asker', wanted: 0, grants: [] }).metadata.labels?.['warren.dev/open'],
      undefined,
    );
  });
});

describe('Lease times', () => {
  it('are MicroTime with exactly six fractional digits, and read back', () => {
    const ms = Date.UTC(2026, 10, 24, 22, 30, 40, 242);
    assert.equal(microTime(ms), '2026-11-24T22:30:40.242000Z');
    assert.equal(parseMicroTime('2026-11-24T22:30:40.242220Z'), ms + 0.22);
    assert.equal(parseMicroTime(microTime(ms)), ms);
    assert.ok(Number.isNaN(parseMicroTime('yesterday')));
  });
});
