/**
 * The allocator never hands out a reserved address (src/ipam/reserved.ts), on every kind of store
 * pool: a range on one SQLite file, and a range split into blocks on the two-tier store.
 * A reservation over an address in use keeps it held, and takes effect at its release.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Allocator } from '../../src/allocator/allocator.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { parseIP } from '../../src/ipam/address.ts';
import { ReservedAddresses } from '../../src/ipam/reserved.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { Store } from '../../src/store/store.ts';
import { tieredStore } from '../store/tiered/nodes.ts';

const owner = (containerID: string) => ({ network: 'net', containerID, ifname: 'eth0' });
const ranges = (ipam: Record<string, unknown>) => parseIpamConfig({ type: 'warren', ...ipam }).ranges;

const KINDS: ReadonlyArray<{ name: string; make: (clock: ManualClock) => { store: Store; blocks: boolean } }> = [
  { name: 'a range on SQLite', make: () => ({ store: new SqliteStore({ path: ':memory:' }), blocks: false }) },
  // Blocks live on the two-tier store only (allocator/block-assigner.ts): there was a 'blocks on
  // SQLite' kind here, one store shared as every node's, which no agent runs any more.
  { name: 'blocks on the two-tier store', make: (clock) => ({ store: tieredStore(clock), blocks: true }) },
];

function setup(kind: (typeof KINDS)[number]) {
  const clock = new ManualClock(1_000_000);
  const { store, blocks } = kind.make(clock);
  const reserved = new ReservedAddresses();
  const allocator = new Allocator({ store, clock, node: 'n1', blocks, reserved });
  return { store, reserved, allocator };
}

/** Allocates until the range is full; the addresses handed out, and the refusal that ended it. */
async function exhaust(allocator: Allocator, r: ReturnType<typeof ranges>, prefix: string) {
  const got: string[] = [];
  for (let i = 0; ; i++) {
    try {
      const [a] = await allocator.allocate({ owner: owner(`${prefix}${i}`), ranges: r });
      got.push(a?.allocation.address as string);
    } catch (error) {
      return { got, error };
    }
  }
}

describe('reservations in the allocator', () => {
  for (const kind of KINDS) {
    describe(kind.name, () => {
      it('never hands out a free reserved address, even on a small range exhausted around it', async () => {
        const { reserved, allocator, store } = setup(kind);
        reserved.replace([{ name: 'router', reason: 'the VRRP address', addresses: ['10.0.0.3'] }]);
        const { got, error } = await exhaust(allocator, ranges({ range: '10.0.0.0/29' }), 'c');
        assert.deepEqual(got.sort(), ['10.0.0.1', '10.0.0.2', '10.0.0.4', '10.0.0.5', '10.0.0.6']);
        assert.ok(isWarrenError(error, 'POOL_EXHAUSTED'), String(error));
        assert.match((error as Error).message, /held back by WarrenReservation "router" \(the VRRP address\)/);
        await store.close();
      });

      it('keeps an address in use that a reservation covers, and never hands it out after its release', async () => {
        const { reserved, allocator, store } = setup(kind);
        const r = ranges({ range: '10.0.0.0/29' });
        const [first] = await allocator.allocate({ owner: owner('live'), ranges: r });
        const live = first?.allocation.address as string;
        reserved.replace([{ name: 'later', addresses: [`${live}/32`] }]);
        const [retry] = await allocator.allocate({ owner: owner('live'), ranges: r });
        assert.equal(retry?.allocation.address, live, 'a retried ADD keeps what it holds');
        assert.equal((await allocator.held(owner('live'))).length, 1, 'the reservation released nothing');
        assert.equal((await allocator.release(owner('live'), 0)).length, 1);
        const { got } = await exhaust(allocator, r, 'after');
        assert.equal(got.length, 5, 'every other address of the /29');
        assert.ok(!got.includes(live), `${live} is not handed out after its release`);
        await store.close();
      });

      it('refuses a requested reserved address with code INVALID_CONFIG naming the reservation', async () => {
        const { reserved, allocator, store } = setup(kind);
        reserved.replace([{ name: 'gw-spare', addresses: ['10.0.0.0/30'] }]);
        const requested = [parseIP('10.0.0.2') as NonNullable<ReturnType<typeof parseIP>>];
        await assert.rejects(
          allocator.allocate({ owner: owner('asks'), ranges: ranges({ range: '10.0.0.0/24' }), requested }),
          (error: unknown) =>
            isWarrenError(error, 'INVALID_CONFIG') &&
            /requested address 10\.0\.0\.2 is reserved by WarrenReservation "gw-spare"/.test((error as Error).message),
        );
        reserved.replace([]);
        const [a] = await allocator.allocate({
          owner: owner('asks'),
          ranges: ranges({ range: '10.0.0.0/24' }),
          requested,
        });
        assert.equal(a?.allocation.address, '10.0.0.2', 'honoured once the reservation is gone');
        await store.close();
      });
    });
  }

  it('never claims a block the reservations hold back whole: it could hand nothing out', async () => {
    const clock = new ManualClock(1_000_000);
    const store = tieredStore(clock); // blocks: on two tiers, as agents run them
    const reserved = new ReservedAddresses();
    reserved.replace([{ name: 'low', addresses: ['10.0.0.0/29'] }]);
    const allocator = new Allocator({ store, clock, node: 'n1', blocks: true, reserved });
    const r = ranges({ range: '10.0.0.0/24', block_size: 30 });
    const [a] = await allocator.allocate({ owner: owner('first'), ranges: r });
    assert.equal(a?.allocation.address, '10.0.0.8');
    // Every node's claims in the range, as the cluster keeps them.
    const claimed = (await store.cluster.owners.rangeBlocks(r[0]?.pool as string, { counts: false }))
      .filter((p) => p.affinity !== undefined)
      .map((p) => p.ledger.slice(p.ledger.indexOf('#') + 1));
    assert.deepEqual(claimed, ['10.0.0.8/30'], 'the two reserved blocks below it stay unclaimed');
    await store.close();
  });
});
