/**
 * The allocator over a real SQLite store: idempotency, all-or-nothing dual stack, requested
 * addresses, cooldown on an injected clock, exhaustion, GC, and two writers on one file
 * (the optimistic-conflict path a cluster store will take).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { type IPAddress, parseIP } from '../../src/ipam/address.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { Allocator, attachmentKey } from '../../src/allocator/allocator.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import { tempDir } from '../helpers/processes.ts';
import { tieredStore } from '../store/tiered/nodes.ts';

function setup(clock = new ManualClock(1_000_000)) {
  const store = new SqliteStore({ path: ':memory:' });
  return { store, clock, allocator: new Allocator({ store, clock, node: 'n1' }) };
}

const owner = (containerID: string, ifname = 'eth0', network = 'net') => ({ network, containerID, ifname });
const ranges = (ipam: Record<string, unknown>) => parseIpamConfig({ type: 'warren', ...ipam }).ranges;

describe('Allocator', () => {
  it('returns the same address to a retried ADD of the same attachment', async () => {
    const { allocator } = setup();
    const r = ranges({ range: '10.0.0.0/29' });
    const first = await allocator.allocate({ owner: owner('a'), ranges: r });
    const retry = await allocator.allocate({ owner: owner('a'), ranges: r });
    assert.equal(retry[0]?.allocation.address, first[0]?.allocation.address);
    assert.equal(retry[0]?.fresh, false);
    const other = await allocator.allocate({ owner: owner('a', 'net1'), ranges: r });
    assert.notEqual(
      other[0]?.allocation.address,
      first[0]?.allocation.address,
      'another interface is another attachment',
    );
  });

  it('a re-ADD in a new namespace moves the record there, so a release that rests on the old namespace takes nothing', async () => {
    for (const blocks of [false, true]) {
      const clock = new ManualClock(1_000_000);
      const store = blocks ? tieredStore(clock) : new SqliteStore({ path: ':memory:' }); // blocks: two tiers
      const allocator = new Allocator({ store, clock, node: 'n1', blocks });
      const r = ranges({ range: '10.0.0.0/24' });
      const first = await allocator.allocate({ owner: owner('a'), ranges: r, netns: '/run/netns/old' });
      const again = await allocator.allocate({ owner: owner('a'), ranges: r, netns: '/run/netns/new' });
      assert.equal(again[0]?.allocation.address, first[0]?.allocation.address);
      assert.equal(again[0]?.allocation.netns, '/run/netns/new');
      assert.deepEqual(
        (await allocator.held(owner('a'))).map((a) => a.netns),
        ['/run/netns/new'],
      );
      // Decided while the record still said /run/netns/old, committed after the re-ADD: nothing goes.
      assert.deepEqual(await allocator.release(owner('a'), 0, { netns: '/run/netns/old' }), []);
      assert.equal((await allocator.release(owner('a'), 0, { netns: '/run/netns/new' })).length, 1);
    }
  });

  it('hands out addresses next-after-last, so a released address is not reused at once', async () => {
    const { allocator } = setup();
    const r = ranges({ range: '10.0.0.0/29' }); // .1 to .6
    const a = await allocator.allocate({ owner: owner('a'), ranges: r });
    await allocator.allocate({ owner: owner('b'), ranges: r });
    await allocator.release(owner('a'));
    const c = await allocator.allocate({ owner: owner('c'), ranges: r });
    assert.equal(a[0]?.allocation.address, '10.0.0.1');
    assert.equal(c[0]?.allocation.address, '10.0.0.3');
  });

  it('reports exhaustion with its own error and allocates nothing more', async () => {
    const { allocator, store } = setup();
    const r = ranges({ range: '10.0.0.0/30' }); // .1 and .2
    await allocator.allocate({ owner: owner('a'), ranges: r });
    await allocator.allocate({ owner: owner('b'), ranges: r });
    await assert.rejects(
      allocator.allocate({ owner: owner('c'), ranges: r }),
      (e) => isWarrenError(e, 'POOL_EXHAUSTED') && /10\.0\.0\.0\/30/.test(e.message),
    );
    assert.equal((await store.list()).length, 2);
  });

  it('gives a dual-stack attachment both addresses or neither', async () => {
    const { allocator, store } = setup();
    const r = ranges({ ipRanges: [{ range: '10.0.0.0/24' }, { range: 'fd00::/126' }] }); // v6: ::1..::3
    for (const id of ['a', 'b', 'c']) {
      const got = await allocator.allocate({ owner: owner(id), ranges: r });
      assert.deepEqual(
        got.map((g) => parseIP(g.allocation.address)?.family),
        [4, 6],
      );
    }
    await assert.rejects(allocator.allocate({ owner: owner('d'), ranges: r }), (e) =>
      isWarrenError(e, 'POOL_EXHAUSTED'),
    );
    assert.deepEqual(await store.findByOwner({ network: 'net', containerID: 'd' }), [], 'the IPv4 half was given back');
  });

  it('honours a requested address and refuses one that is taken, excluded or outside', async () => {
    const { allocator } = setup();
    const r = ranges({ range: '10.0.0.0/24', exclude: ['10.0.0.128/25'] });
    const got = await allocator.allocate({
      owner: owner('a'),
      ranges: r,
      requested: [parseIP('10.0.0.77') as IPAddress],
    });
    assert.equal(got[0]?.allocation.address, '10.0.0.77');
    const refuse = async (ip: string, pattern: RegExp) =>
      assert.rejects(
        allocator.allocate({ owner: owner(`x-${ip}`), ranges: r, requested: [parseIP(ip) as IPAddress] }),
        (e) => isWarrenError(e, 'ADDRESS_UNAVAILABLE') && pattern.test(e.message),
      );
    await refuse('10.0.0.77', /already allocated/);
    await refuse('10.0.0.200', /excluded/);
    await refuse('10.0.0.0', /outside the allocatable span/);
    await refuse('10.9.9.9', /none of the configured ranges/);
    await assert.rejects(
      allocator.allocate({ owner: owner('a'), ranges: r, requested: [parseIP('10.0.0.78') as IPAddress] }),
      /already holds 10\.0\.0\.77/,
    );
  });

  it('names who holds a requested address that is taken: the pod and the container', async () => {
    for (const blocks of [false, true]) {
      const clock = new ManualClock(1_000_000);
      const store = blocks ? tieredStore(clock) : new SqliteStore({ path: ':memory:' }); // blocks: two tiers
      const allocator = new Allocator({ store, clock, node: 'n1', blocks });
      const r = ranges({ range: '10.0.0.0/24' });
      const requested = [parseIP('10.0.0.77') as IPAddress];
      await allocator.allocate({ owner: owner('c1'), ranges: r, requested, podNamespace: 'ns', podName: 'web-0' });
      await assert.rejects(
        allocator.allocate({ owner: owner('c2'), ranges: r, requested }),
        (e) =>
          isWarrenError(e, 'ADDRESS_UNAVAILABLE') &&
          /10\.0\.0\.77 is already allocated in .* \(held by pod ns\/web-0, container c1 eth0 of network net\)$/.test(
            e.message,
          ),
      );
      await store.close();
    }
  });

  it('keeps a released address resting for the cooldown, on the injected clock', async () => {
    const { allocator, clock } = setup();
    const r = ranges({ range: '10.0.0.0/30' }); // .1 and .2
    await allocator.allocate({ owner: owner('a'), ranges: r, cooldownSeconds: 60 });
    await allocator.allocate({ owner: owner('b'), ranges: r, cooldownSeconds: 60 });
    await allocator.release(owner('a'), 60);
    await assert.rejects(
      allocator.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 }),
      (e) => isWarrenError(e, 'POOL_EXHAUSTED') && /1 resting/.test(e.message),
    );
    clock.advance(59_999);
    await assert.rejects(allocator.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 }), (e) =>
      isWarrenError(e, 'POOL_EXHAUSTED'),
    );
    clock.advance(1);
    const c = await allocator.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 });
    assert.equal(c[0]?.allocation.address, '10.0.0.1');
  });

  it('a wall clock stepped back a day never keeps a released address resting past its cooldown (the rest runs on the monotonic clock)', async () => {
    const { allocator, clock, store } = setup();
    const r = ranges({ range: '10.0.0.0/30' }); // .1 and .2
    await allocator.allocate({ owner: owner('a'), ranges: r, cooldownSeconds: 60 });
    await allocator.allocate({ owner: owner('b'), ranges: r, cooldownSeconds: 60 });
    await allocator.release(owner('a'), 60);
    clock.stepWall(-86_400_000);
    await assert.rejects(
      allocator.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 }),
      (e) => isWarrenError(e, 'POOL_EXHAUSTED'),
      'still resting',
    );
    clock.advance(60_000);
    // Read from the store by a new allocator too (the agent restarted): the rest is timed by its stamp.
    const restarted = new Allocator({ store, clock, node: 'n1' });
    const c = await restarted.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 });
    assert.equal(c[0]?.allocation.address, '10.0.0.1');
  });

  it('a wall clock stepped forward an hour never frees a just-released address at once', async () => {
    const { allocator, clock, store } = setup();
    const r = ranges({ range: '10.0.0.0/30' });
    await allocator.allocate({ owner: owner('a'), ranges: r, cooldownSeconds: 60 });
    await allocator.allocate({ owner: owner('b'), ranges: r, cooldownSeconds: 60 });
    await allocator.release(owner('a'), 60);
    clock.stepWall(3_600_000);
    await assert.rejects(
      allocator.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 }),
      (e) => isWarrenError(e, 'POOL_EXHAUSTED') && /1 resting/.test(e.message),
    );
    const restarted = new Allocator({ store, clock, node: 'n1' });
    await assert.rejects(
      restarted.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 }),
      (e) => isWarrenError(e, 'POOL_EXHAUSTED'),
      'nor after a restart',
    );
    clock.advance(60_000);
    const c = await restarted.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 });
    assert.equal(c[0]?.allocation.address, '10.0.0.1');
  });

  it('a rest recorded in an earlier boot, or by an older Warren, is timed by its wall-clock end', async () => {
    const clock = new ManualClock(1_000_000);
    const { allocator, store } = setup(clock);
    const r = ranges({ range: '10.0.0.0/30' });
    await allocator.allocate({ owner: owner('a'), ranges: r, cooldownSeconds: 60 });
    await allocator.allocate({ owner: owner('b'), ranges: r, cooldownSeconds: 60 });
    await allocator.release(owner('a'), 60);
    clock.reboot('boot-2', 5);
    clock.advance(30_000);
    const rebooted = new Allocator({ store, clock, node: 'n1' });
    await assert.rejects(
      rebooted.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 }),
      (e) => isWarrenError(e, 'POOL_EXHAUSTED'),
      '30 s of the wall clock left',
    );
    clock.advance(30_000);
    assert.equal(
      (await rebooted.allocate({ owner: owner('c'), ranges: r, cooldownSeconds: 60 }))[0]?.allocation.address,
      '10.0.0.1',
    );
  });

  it('releases idempotently and reports what it released', async () => {
    const { allocator } = setup();
    const r = ranges({ range: '10.0.0.0/24' });
    await allocator.allocate({ owner: owner('a'), ranges: r });
    assert.equal((await allocator.release(owner('a'))).length, 1);
    assert.deepEqual(await allocator.release(owner('a')), []);
    assert.deepEqual(await allocator.release(owner('never-seen')), []);
  });

  it('GC releases only this network’s attachments that are not valid', async () => {
    const { allocator, store } = setup();
    const r = ranges({ range: '10.0.0.0/24' });
    for (const id of ['a', 'b', 'c']) await allocator.allocate({ owner: owner(id), ranges: r });
    await allocator.allocate({ owner: owner('z', 'eth0', 'othernet'), ranges: r });
    const outcome = await allocator.gc('net', new Set([attachmentKey('b', 'eth0')]));
    assert.deepEqual(outcome.released.map((a) => a.containerID).sort(), ['a', 'c']);
    assert.deepEqual(outcome.errors, []);
    assert.deepEqual((await store.list()).map((a) => a.containerID).sort(), ['b', 'z']);
  });

  it('never duplicates an address when two writers share one database file', async () => {
    const path = join(tempDir(), 'shared.db');
    const clock = new ManualClock(0);
    const s1 = new SqliteStore({ path, synchronous: 'NORMAL' });
    const s2 = new SqliteStore({ path, synchronous: 'NORMAL' });
    const a1 = new Allocator({ store: s1, clock, node: 'n1' });
    const a2 = new Allocator({ store: s2, clock, node: 'n2' });
    const r = ranges({ range: '10.1.0.0/24' });
    const got = await Promise.all(
      Array.from({ length: 120 }, (_, i) =>
        (i % 2 === 0 ? a1 : a2).allocate({ owner: owner(`c${i}`), ranges: r }).then((x) => x[0]?.allocation.address),
      ),
    );
    assert.equal(new Set(got).size, 120);
    assert.equal((await s1.list()).length, 120);
    await s1.close();
    await s2.close();
  });
});

// Ranges that overlap within one network_name: overlap.test.ts.
describe('Allocator: ranges of different network_names, and gateways', () => {
  it('keeps overlapping ranges of different network_names apart, as separate address spaces', async () => {
    const { allocator } = setup();
    const [a] = await allocator.allocate({
      owner: owner('a'),
      ranges: ranges({ range: '10.232.2.0/24', network_name: 'red' }),
    });
    const [b] = await allocator.allocate({
      owner: owner('b'),
      ranges: ranges({ range: '10.232.2.0/25', network_name: 'green' }),
    });
    assert.equal(
      a?.allocation.address,
      b?.allocation.address,
      'the same address in two address spaces is not a duplicate',
    );
  });

  it('says it is the gateway when the gateway address is asked for', async () => {
    const { allocator } = setup();
    const r = ranges({ range: '10.232.3.0/24', gateway: '10.232.3.1' });
    const gateway = parseIP('10.232.3.1');
    assert.ok(gateway !== undefined);
    await assert.rejects(
      allocator.allocate({ owner: owner('a'), ranges: r, requested: [gateway] }),
      /10\.232\.3\.1 is the gateway of 10\.232\.3\.0\/24/,
    );
  });
});
