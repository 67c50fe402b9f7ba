/**
 * The CNI GC rule as a pure function: which allocations of a network a GC may take.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { attachmentKey, gcCandidates, gcScope } from '../../src/allocator/gc.ts';

function allocation(
  containerID: string,
  ifname: string,
  createdAt: number,
  extra: Partial<Allocation> = {},
): Allocation {
  return {
    pool: '10.0.0.0/24',
    address: `10.0.0.${createdAt}`,
    network: 'net',
    containerID,
    ifname,
    node: 'n1',
    createdAt,
    ...extra,
  };
}

describe('gcCandidates', () => {
  it('takes every attachment not in the valid list, once per attachment', () => {
    const allocations = [
      allocation('a', 'eth0', 1),
      allocation('b', 'eth0', 2),
      allocation('b', 'net1', 3),
      allocation('c', 'eth0', 4, { pool: '10.0.0.0/24' }),
      allocation('c', 'eth0', 5, { pool: 'fd00::/64' }), // dual stack: one owner, two addresses
    ];
    const valid = new Set([attachmentKey('b', 'eth0')]);
    assert.deepEqual(gcCandidates(allocations, valid, {}, undefined), [
      { network: 'net', containerID: 'a', ifname: 'eth0' },
      { network: 'net', containerID: 'b', ifname: 'net1' },
      { network: 'net', containerID: 'c', ifname: 'eth0' },
    ]);
  });

  it('spares allocations younger than the limit: an ADD after the runtime took its list is in use', () => {
    const allocations = [allocation('old', 'eth0', 10), allocation('new', 'eth0', 11)];
    assert.deepEqual(
      gcCandidates(allocations, new Set(), { createdAtOrBefore: { wall: 10 } }, undefined).map((o) => o.containerID),
      ['old'],
    );
  });

  it('takes nothing when every attachment is valid, or there is nothing', () => {
    assert.deepEqual(
      gcCandidates([allocation('a', 'eth0', 1)], new Set([attachmentKey('a', 'eth0')]), {}, undefined),
      [],
    );
    assert.deepEqual(gcCandidates([], new Set(), {}, undefined), []);
  });

  it("a GC never releases what a registered adapter answers for: that runtime's resync judges it", () => {
    const podman = allocation('podman-live', 'eth0', 1, { netns: '/run/netns/netns-1' });
    const containerdGone = allocation('ctr-gone', 'eth0', 2, { netns: '/var/run/netns/cni-2' });
    const runtimeOf = (a: Allocation) => (a.netns?.startsWith('/run/netns/netns-') === true ? 'podman' : undefined);
    // containerd's GC: its list has none of podman's containers.
    assert.deepEqual(
      gcCandidates(
        [podman, containerdGone],
        new Set([attachmentKey('ctr-live', 'eth0')]),
        {},
        undefined,
        undefined,
        runtimeOf,
      ).map((o) => o.containerID),
      ['ctr-gone'],
    );
  });

  it("a GC whose list names an adapter's attachment is that runtime's, and never takes another runtime's containers", () => {
    const podman = allocation('podman-live', 'eth0', 1, { netns: '/run/netns/netns-1' });
    const containerdLive = allocation('ctr-live', 'eth0', 2, { netns: '/var/run/netns/cni-2' });
    const runtimeOf = (a: Allocation) => (a.netns?.startsWith('/run/netns/netns-') === true ? 'podman' : undefined);
    assert.deepEqual(
      gcCandidates(
        [podman, containerdLive],
        new Set([attachmentKey('podman-live', 'eth0')]),
        {},
        undefined,
        undefined,
        runtimeOf,
      ),
      [],
    );
  });

  it('keeps container IDs and interface names apart in the attachment key', () => {
    assert.notEqual(attachmentKey('a/b', 'c'), attachmentKey('a', 'b/c'));
    assert.notEqual(attachmentKey('a","b', 'c'), attachmentKey('a', 'b","c'));
  });
});

describe('gcScope', () => {
  it("looks at this node's allocations only when nodes share the store", () => {
    assert.deepEqual(gcScope('net', 'n1', false), { network: 'net' });
    assert.deepEqual(gcScope('net', 'n1', true), { network: 'net', node: 'n1' });
  });
});
