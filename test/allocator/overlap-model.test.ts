/**
 * Overlapping ranges of one network_name against a model (issue 37): random ADDs and DELs on five
 * nested and disjoint ranges, with the agent restarted at random (what it admitted in memory is
 * gone, what its SQLite file holds stays). After every step no address is held by two live
 * attachments, every address lies in its own config's span, and the store holds exactly the live
 * attachments. The cover rule's changes (a range admitted whole around emptied pools, carved around
 * busy ones, served from the pool around it) are all reached by such sequences.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Allocator } from '../../src/allocator/allocator.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { parseIP } from '../../src/ipam/address.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';

const RANGES = ['10.232.9.0/27', '10.232.9.8/29', '10.232.9.8/30', '10.232.9.16/28', '10.232.9.0/26'].map(
  (range) => parseIpamConfig({ type: 'warren', range, network_name: 'model' }).ranges,
);

type Step =
  | { readonly kind: 'add'; readonly range: number; readonly id: number }
  | { readonly kind: 'del'; readonly id: number }
  | { readonly kind: 'restart' };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('add' as const), range: fc.nat(4), id: fc.nat(16) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('del' as const), id: fc.nat(16) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('restart' as const) }) },
);

const owner = (id: number, range: number) => ({ network: `net${range}`, containerID: `c${id}`, ifname: 'eth0' });

describe('overlapping ranges of one network_name, against a model', () => {
  it('never holds one address twice, nor outside its config’s span, across ADDs, DELs and restarts', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), async (steps) => {
        const clock = new ManualClock(1_000_000);
        const store = new SqliteStore({ path: ':memory:' });
        let allocator = new Allocator({ store, clock, node: 'n1' });
        const live = new Map<number, { range: number; address: string }>();
        try {
          for (const s of steps) {
            if (s.kind === 'restart') allocator = new Allocator({ store, clock, node: 'n1' });
            else if (s.kind === 'del') {
              const held = live.get(s.id);
              if (held !== undefined) await allocator.release(owner(s.id, held.range));
              live.delete(s.id);
            } else if (!live.has(s.id)) {
              const ranges = RANGES[s.range] ?? [];
              try {
                const [a] = await allocator.allocate({ owner: owner(s.id, s.range), ranges });
                assert.ok(a, 'an address');
                live.set(s.id, { range: s.range, address: a.allocation.address });
                const ip = parseIP(a.allocation.address);
                const spec = ranges[0];
                assert.ok(
                  ip && spec && ip.value >= spec.first && ip.value <= spec.last,
                  `${a.allocation.address} in ${spec?.subnet}`,
                );
              } catch (error) {
                if (!isWarrenError(error, 'POOL_EXHAUSTED')) throw error;
              }
            }
            const addresses = [...live.values()].map((l) => l.address);
            assert.equal(new Set(addresses).size, addresses.length, `an address held twice: ${addresses.join(' ')}`);
            assert.deepEqual((await store.list()).map((a) => a.address).sort(), [...addresses].sort());
          }
        } finally {
          await store.close();
        }
      }),
      { numRuns: 300 },
    );
  });
});
