/**
 * The contract of the Store interface (src/store/store.ts), run against every implementation.
 * A new backend passes this file before the allocator may use it.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { Allocation } from '../../src/ipam/allocation.ts';
import type { LedgerOp, Store } from '../../src/store/store.ts';

export interface StoreFactory {
  /** A new, empty store. */
  create(): Promise<Store>;
  /** The same data opened again (after close), to prove commits persist; absent for memory-only backends. */
  reopen?(store: Store): Promise<Store>;
}

let serial = 0;
function allocation(pool: string, address: string, extra: Partial<Allocation> = {}): Allocation {
  serial += 1;
  return {
    pool,
    address,
    network: 'net',
    containerID: `c${serial}`,
    ifname: 'eth0',
    node: 'n1',
    createdAt: 1_000 + serial,
    ...extra,
  };
}

function allocate(a: Allocation): LedgerOp {
  return { op: 'allocate', allocation: a };
}

export function storeConformance(name: string, factory: StoreFactory): void {
  describe(`Store conformance: ${name}`, () => {
    const opened: Store[] = [];
    const fresh = async (): Promise<Store> => {
      const s = await factory.create();
      opened.push(s);
      return s;
    };
    after(async () => {
      for (const s of opened) await s.close().catch(() => undefined);
    });

    it('reads a pool never written as empty at revision 0', async () => {
      const s = await fresh();
      const read = await s.readLedger('10.0.0.0/24');
      assert.equal(read.kind, 'snapshot');
      assert.equal(read.revision, 0);
      if (read.kind === 'snapshot') {
        assert.deepEqual(read.allocations, []);
        assert.deepEqual(read.resting, []);
        assert.equal(read.cursor, undefined);
      }
    });

    it('commits at the current revision and bumps it', async () => {
      const s = await fresh();
      const a = allocation('p', '10.0.0.2', {
        podNamespace: 'ns',
        podName: 'pod',
        podUID: 'uid-1',
        netns: '/var/run/netns/x',
      });
      const r = await s.commit('p', 0, [allocate(a), { op: 'cursor', address: '10.0.0.2' }]);
      assert.equal(r.kind, 'committed');
      const read = await s.readLedger('p');
      assert.ok(read.revision > 0);
      assert.equal(read.kind, 'snapshot');
      if (read.kind === 'snapshot') {
        assert.deepEqual(read.allocations, ['10.0.0.2']);
        assert.equal(read.cursor, '10.0.0.2');
      }
      assert.deepEqual(await s.findByOwner({ network: 'net', containerID: a.containerID, ifname: 'eth0' }), [a]);
    });

    it('moves a revision past the one a commit names (revisionPast), never back', async () => {
      const s = await fresh();
      const first = await s.commit('p', 0, [{ op: 'revisionPast', revision: 10 }]);
      assert.deepEqual(first.kind === 'committed' ? first.revision : first, 11);
      assert.equal((await s.readLedger('p')).revision, 11);
      const second = await s.commit('p', 11, [{ op: 'revisionPast', revision: 5 }]);
      assert.deepEqual(second.kind === 'committed' ? second.revision : second, 12, 'a commit still bumps it by one');
      assert.equal((await s.readLedger('p')).revision, 12);
    });

    it('refuses a commit against a stale revision and changes nothing', async () => {
      const s = await fresh();
      await s.commit('p', 0, [allocate(allocation('p', '10.0.0.2'))]);
      const stale = await s.commit('p', 0, [allocate(allocation('p', '10.0.0.3'))]);
      assert.equal(stale.kind, 'conflict');
      const read = await s.readLedger('p');
      assert.equal(read.kind === 'snapshot' && read.allocations.length, 1);
    });

    it('applies all operations of a commit or none: a taken address voids the whole commit', async () => {
      const s = await fresh();
      const first = await s.commit('p', 0, [allocate(allocation('p', '10.0.0.2'))]);
      assert.equal(first.kind, 'committed');
      const rev = first.kind === 'committed' ? first.revision : -1;
      const mixed = await s.commit('p', rev, [
        allocate(allocation('p', '10.0.0.3')),
        { op: 'cursor', address: '10.0.0.3' },
        allocate(allocation('p', '10.0.0.2')),
      ]);
      assert.equal(mixed.kind, 'conflict');
      const read = await s.readLedger('p');
      assert.equal(read.revision, rev);
      assert.equal(read.kind, 'snapshot');
      if (read.kind === 'snapshot') {
        assert.deepEqual(read.allocations, ['10.0.0.2']);
        assert.equal(read.cursor, undefined);
      }
    });

    it('lets one address live in two pools (network_name) but only once per pool', async () => {
      const s = await fresh();
      assert.equal(
        (await s.commit('10.0.0.0/24', 0, [allocate(allocation('10.0.0.0/24', '10.0.0.2'))])).kind,
        'committed',
      );
      assert.equal(
        (await s.commit('10.0.0.0/24@blue', 0, [allocate(allocation('10.0.0.0/24@blue', '10.0.0.2'))])).kind,
        'committed',
      );
      assert.equal((await s.list({ address: '10.0.0.2' })).length, 2);
    });

    it('answers unchanged when the caller already knows the revision', async () => {
      const s = await fresh();
      const r = await s.commit('p', 0, [allocate(allocation('p', '10.0.0.2'))]);
      const rev = r.kind === 'committed' ? r.revision : -1;
      assert.deepEqual(await s.readLedger('p', rev), { kind: 'unchanged', revision: rev });
      assert.equal((await s.readLedger('p', rev - 1)).kind, 'snapshot');
    });

    it('treats releasing an address that is not allocated as a no-op', async () => {
      const s = await fresh();
      const r = await s.commit('p', 0, [{ op: 'release', address: '10.0.0.9' }]);
      assert.equal(r.kind, 'committed');
      const read = await s.readLedger('p');
      assert.equal(read.kind === 'snapshot' && read.allocations.length, 0);
    });

    it('keeps a released address resting until it is allocated again or unrested', async () => {
      const s = await fresh();
      let rev = 0;
      const step = async (ops: LedgerOp[]) => {
        const r = await s.commit('p', rev, ops);
        assert.equal(r.kind, 'committed');
        if (r.kind === 'committed') rev = r.revision;
      };
      await step([allocate(allocation('p', '10.0.0.2')), allocate(allocation('p', '10.0.0.3'))]);
      await step([
        { op: 'release', address: '10.0.0.2', reusableAt: 5_000 },
        { op: 'release', address: '10.0.0.3', reusableAt: 6_000 },
      ]);
      let read = await s.readLedger('p');
      assert.equal(read.kind, 'snapshot');
      if (read.kind === 'snapshot') {
        assert.deepEqual(read.allocations, []);
        assert.deepEqual(
          [...read.resting].sort((x, y) => x.address.localeCompare(y.address)),
          [
            { address: '10.0.0.2', reusableAt: 5_000 },
            { address: '10.0.0.3', reusableAt: 6_000 },
          ],
        );
      }
      await step([allocate(allocation('p', '10.0.0.2')), { op: 'unrest', address: '10.0.0.3' }]);
      read = await s.readLedger('p');
      if (read.kind === 'snapshot') {
        assert.deepEqual(read.allocations, ['10.0.0.2']);
        assert.deepEqual(read.resting, []);
      }
      const summary = (await s.ledgers()).find((p) => p.ledger === 'p');
      assert.equal(summary?.allocated, 1);
      assert.equal(summary?.resting, 0);
    });

    it('keeps when an allocation was made and when a rest ends on the monotonic clock, exactly, and records without one as they were', async () => {
      const s = await fresh();
      const stamped = allocation('p', '10.0.0.2', {
        createdAt: 1_700_000_000_123,
        createdStamp: { boot: '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0', at: 123_456.789 },
      });
      const plain = allocation('p', '10.0.0.3');
      const r1 = await s.commit('p', 0, [
        allocate(stamped),
        allocate(plain),
        allocate(allocation('p', '10.0.0.4', { containerID: 'c4' })),
      ]);
      assert.equal(r1.kind, 'committed');
      assert.deepEqual(
        await s.findByOwner({ network: stamped.network, containerID: stamped.containerID, ifname: stamped.ifname }),
        [stamped],
      );
      assert.deepEqual((await s.list({ address: '10.0.0.3' }))[0], plain);
      assert.equal('createdStamp' in ((await s.list({ address: '10.0.0.3' }))[0] as Allocation), false);
      if (r1.kind !== 'committed') return;
      const r2 = await s.commit('p', r1.revision, [
        { op: 'release', address: '10.0.0.2', reusableAt: 9_000, reusableStamp: { boot: 'b-1', at: 77.5 } },
        { op: 'release', address: '10.0.0.3', reusableAt: 9_500 },
      ]);
      assert.equal(r2.kind, 'committed');
      const read = await s.readLedger('p');
      assert.ok(read.kind === 'snapshot');
      assert.deepEqual(
        [...read.resting].sort((x, y) => x.address.localeCompare(y.address)),
        [
          { address: '10.0.0.2', reusableAt: 9_000, reusableStamp: { boot: 'b-1', at: 77.5 } },
          { address: '10.0.0.3', reusableAt: 9_500 },
        ],
      );
      // Resting again without a stamp (a release by an older Warren) leaves no stale stamp behind.
      if (r2.kind !== 'committed') return;
      const r3 = await s.commit('p', r2.revision, [allocate(allocation('p', '10.0.0.2', { containerID: 'c5' }))]);
      assert.equal(r3.kind, 'committed');
      if (r3.kind !== 'committed') return;
      await s.commit('p', r3.revision, [{ op: 'release', address: '10.0.0.2', reusableAt: 9_900 }]);
      const again = await s.readLedger('p');
      assert.ok(again.kind === 'snapshot');
      assert.deepEqual(
        again.resting.find((r) => r.address === '10.0.0.2'),
        { address: '10.0.0.2', reusableAt: 9_900 },
      );
    });

    it('finds allocations by owner, with or without the interface', async () => {
      const s = await fresh();
      const eth0 = allocation('p', '10.0.0.2', { containerID: 'ctr', ifname: 'eth0' });
      const net1 = allocation('q', 'fd00::2', { containerID: 'ctr', ifname: 'net1' });
      await s.commit('p', 0, [allocate(eth0)]);
      await s.commit('q', 0, [allocate(net1)]);
      assert.deepEqual(await s.findByOwner({ network: 'net', containerID: 'ctr', ifname: 'eth0' }), [eth0]);
      assert.deepEqual(await s.findByOwner({ network: 'net', containerID: 'ctr' }), [eth0, net1]);
      assert.deepEqual(await s.findByOwner({ network: 'other', containerID: 'ctr' }), []);
    });

    it('filters the allocation list by every field', async () => {
      const s = await fresh();
      const a = allocation('p', '10.0.0.2', {
        network: 'n1',
        containerID: 'A',
        ifname: 'eth0',
        podNamespace: 'ns1',
        podName: 'web',
        podUID: 'u1',
        node: 'x',
      });
      const b = allocation('p', '10.0.0.3', {
        network: 'n2',
        containerID: 'B',
        ifname: 'net1',
        podNamespace: 'ns2',
        podName: 'db',
        podUID: 'u2',
        node: 'y',
      });
      await s.commit('p', 0, [allocate(a), allocate(b)]);
      const cases: Array<[Record<string, string>, Allocation[]]> = [
        [{}, [a, b]],
        [{ ledger: 'p' }, [a, b]],
        [{ ledger: 'nope' }, []],
        [{ network: 'n2' }, [b]],
        [{ containerID: 'A' }, [a]],
        [{ ifname: 'net1' }, [b]],
        [{ podNamespace: 'ns1' }, [a]],
        [{ podName: 'db' }, [b]],
        [{ podUID: 'u1' }, [a]],
        [{ node: 'y' }, [b]],
        [{ address: '10.0.0.2' }, [a]],
        [{ network: 'n1', node: 'y' }, []],
      ];
      for (const [filter, expected] of cases) assert.deepEqual(await s.list(filter), expected, JSON.stringify(filter));
    });

    it('matches a range pool to itself and its blocks only, never to a pool that merely shares a prefix', async () => {
      const s = await fresh();
      const inRange = allocation('10.0.0.0/24', '10.0.0.2');
      const inBlock = allocation('10.0.0.0/24#10.0.0.64/26', '10.0.0.70');
      const named = allocation('10.0.0.0/24@blue', '10.0.0.2');
      const namedBlock = allocation('10.0.0.0/24@blue#10.0.0.0/26', '10.0.0.3');
      for (const a of [inRange, inBlock, named, namedBlock])
        assert.equal((await s.commit(a.pool, 0, [allocate(a)])).kind, 'committed');
      assert.deepEqual(await s.list({ rangePool: '10.0.0.0/24' }), [inRange, inBlock]);
      assert.deepEqual(await s.list({ rangePool: '10.0.0.0/24@blue' }), [named, namedBlock]);
      assert.deepEqual(await s.list({ rangePool: '10.0.0.0/24', address: '10.0.0.70' }), [inBlock]);
      assert.deepEqual(await s.list({ ledger: '10.0.0.0/24' }), [inRange]);
      assert.deepEqual(await s.list({ ledger: '10.0.0.0/24#10.0.0.64/26', rangePool: '10.0.0.0/24' }), [inBlock]);
    });

    it("keeps a pool's cooldown attribute, set by commit, apart from its description", async () => {
      const s = await fresh();
      const first = await s.readLedger('p');
      assert.equal(first.kind === 'snapshot' && first.cooldownSeconds, undefined, 'never set');
      const r = await s.commit('p', 0, [{ op: 'cooldown', seconds: 30 }]);
      assert.equal(r.kind, 'committed');
      const read = await s.readLedger('p');
      assert.equal(read.kind === 'snapshot' && read.cooldownSeconds, 30);
      if (r.kind !== 'committed') return;
      await s.commit('p', r.revision, [{ op: 'cooldown', seconds: 0 }]);
      const again = await s.readLedger('p');
      assert.equal(again.kind === 'snapshot' && again.cooldownSeconds, 0, 'zero is a value, not absence');
    });

    it('describes pools for operators', async () => {
      const s = await fresh();
      const description = {
        subnet: '10.0.0.0/24',
        first: '10.0.0.1',
        last: '10.0.0.254',
        capacity: '253',
        cooldownSeconds: 30,
      };
      await s.commit('p', 0, [allocate(allocation('p', '10.0.0.2')), { op: 'describe', description }]);
      const [summary] = await s.ledgers();
      assert.equal(summary?.ledger, 'p');
      assert.equal(summary?.allocated, 1);
      assert.deepEqual(summary?.description, description);
    });

    it('lets exactly one of many commits racing on one revision win', async () => {
      const s = await fresh();
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => s.commit('p', 0, [allocate(allocation('p', `10.0.0.${i + 2}`))])),
      );
      assert.equal(results.filter((r) => r.kind === 'committed').length, 1);
      const read = await s.readLedger('p');
      assert.equal(read.kind === 'snapshot' && read.allocations.length, 1);
    });

    it('lets an owner hold at most one address per pool', async () => {
      const s = await fresh();
      const first = allocation('p', '10.0.0.2');
      const r = await s.commit('p', 0, [allocate(first)]);
      assert.equal(r.kind, 'committed');
      if (r.kind !== 'committed') return;
      const again = await s.commit('p', r.revision, [allocate({ ...first, address: '10.0.0.3', createdAt: 5 })]);
      assert.equal(again.kind, 'conflict');
      assert.deepEqual(
        (await s.list({ ledger: 'p' })).map((a) => a.address),
        ['10.0.0.2'],
      );
      // A block of the range counts as the range: no second address for the owner there either.
      const inBlock = await s.commit('p#10.0.0.64/26', 0, [
        allocate({ ...first, pool: 'p#10.0.0.64/26', address: '10.0.0.70' }),
      ]);
      assert.equal(inBlock.kind, 'conflict');
      const otherRange = await s.commit('q#10.0.0.64/26', 0, [
        allocate({ ...first, pool: 'q#10.0.0.64/26', address: '10.0.0.70' }),
      ]);
      assert.equal(otherRange.kind, 'committed');
    });

    it('moves an allocation to the network namespace its holder lives in now, and only for its holder', async () => {
      const s = await fresh();
      const held = allocation('p', '10.0.0.2', { netns: '/var/run/netns/a' });
      const r = await s.commit('p', 0, [allocate(held)]);
      assert.equal(r.kind, 'committed');
      if (r.kind !== 'committed') return;
      const stranger = await s.commit('p', r.revision, [
        { op: 'relocate', allocation: { ...held, containerID: 'someone-else', netns: '/var/run/netns/x' } },
      ]);
      assert.equal(stranger.kind, 'conflict');
      const moved = await s.commit('p', r.revision, [
        { op: 'relocate', allocation: { ...held, netns: '/var/run/netns/b' } },
      ]);
      assert.equal(moved.kind, 'committed');
      if (moved.kind === 'committed')
        assert.ok(moved.revision > r.revision, 'a relocation is a write: a release decided before it conflicts');
      assert.deepEqual(
        (await s.findByOwner(held)).map((a) => a.netns),
        ['/var/run/netns/b'],
      );
      assert.deepEqual(
        (await s.list({ ledger: 'p' })).map((a) => [a.address, a.netns, a.createdAt]),
        [['10.0.0.2', '/var/run/netns/b', held.createdAt]],
      );
      const released = await s.commit('p', moved.kind === 'committed' ? moved.revision : 0, [
        { op: 'release', address: '10.0.0.2' },
      ]);
      assert.equal(released.kind, 'committed');
      const gone = await s.commit('p', released.kind === 'committed' ? released.revision : 0, [
        { op: 'relocate', allocation: { ...held, netns: '/var/run/netns/c' } },
      ]);
      assert.equal(gone.kind, 'conflict', 'a released allocation is not brought back by a relocation');
      assert.deepEqual(await s.findByOwner(held), []);
    });

    it("keeps a block's affinity, lists blocks by prefix and matches a range pool to its blocks", async () => {
      const s = await fresh();
      const block = 'r#10.0.0.0/26';
      const claimed = await s.commit(block, 0, [{ op: 'claim', node: 'n1' }]);
      assert.equal(claimed.kind, 'committed');
      if (claimed.kind !== 'committed') return;
      const read = await s.readLedger(block);
      assert.equal(read.kind === 'snapshot' && read.affinity, 'n1');
      const a = allocation(block, '10.0.0.5');
      const r2 = await s.commit(block, claimed.revision, [allocate(a)]);
      assert.equal(r2.kind, 'committed');
      await s.commit('r2#10.0.0.0/26', 0, [{ op: 'claim', node: 'n2' }]);
      const summaries = await s.ledgers('r#');
      assert.deepEqual(
        summaries.map((p) => [p.ledger, p.affinity, p.allocated]),
        [[block, 'n1', 1]],
      );
      assert.deepEqual(await s.list({ rangePool: 'r' }), [a]);
      assert.deepEqual(await s.list({ rangePool: 'r2' }), []);
      assert.deepEqual(await s.list({ ledger: 'r' }), [], 'pool names one ledger exactly, not its blocks');
      assert.deepEqual(await s.list({ ledger: block }), [a]);
      if (r2.kind !== 'committed') return;
      await s.commit(block, r2.revision, [{ op: 'unclaim' }]);
      const after = await s.readLedger(block);
      assert.equal(after.kind === 'snapshot' && after.affinity, undefined);
      assert.deepEqual(after.kind === 'snapshot' && after.allocations, ['10.0.0.5']);
    });

    it('lets exactly one of many racing claims of a block win', async () => {
      const s = await fresh();
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) => s.commit('r#10.0.0.64/26', 0, [{ op: 'claim', node: `n${i}` }])),
      );
      const winners = results.flatMap((r, i) => (r.kind === 'committed' ? [`n${i}`] : []));
      assert.equal(winners.length, 1);
      const read = await s.readLedger('r#10.0.0.64/26');
      assert.equal(read.kind === 'snapshot' && read.affinity, winners[0]);
    });

    it('reports itself healthy with ping', async () => {
      const s = await fresh();
      await s.ping();
      assert.ok(s.description.length > 0);
    });

    if (factory.reopen !== undefined) {
      const reopen = factory.reopen.bind(factory);
      it('keeps every committed operation across close and reopen', async () => {
        const s = await fresh();
        const a = allocation('p', 'fd00::5', { podUID: 'u', createdStamp: { boot: 'b-2', at: 0.5 } });
        await s.commit('p', 0, [
          allocate(a),
          { op: 'cursor', address: 'fd00::5' },
          { op: 'release', address: 'fd00::9', reusableAt: 42 },
          { op: 'release', address: 'fd00::a', reusableAt: 43, reusableStamp: { boot: 'b-2', at: 9 } },
          { op: 'cooldown', seconds: 7 },
        ]);
        const before = await s.readLedger('p');
        assert.equal(before.kind === 'snapshot' && before.cooldownSeconds, 7);
        await s.close();
        const again = await reopen(s);
        opened.push(again);
        assert.deepEqual(await again.readLedger('p'), before);
        assert.deepEqual(await again.list(), [a]);
      });
    }
  });
}
