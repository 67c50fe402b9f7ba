/**
 * The move from the old one-tier etcd layout to the two-tier store, on a real etcd member.
 *
 * test/fixtures/etcd-legacy/two-nodes.json holds every key the OLD EtcdStore (src/store/etcd-store.ts,
 * removed since) wrote under its prefix for two nodes through the allocator with blocks (nodes/ and
 * tasks/ left out, as leases take them): n1 with 17 allocations in two /28 blocks of 10.77.0.0/24
 * (three resting) and 3 in a /26 block of 10.78.0.0/22 (split at the old default size, not the
 * size the two-tier store would choose), n2 with 10 in one /28 block (two resting).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { openEtcdTier } from '../../../src/store/etcd-tier/tier.ts';
import { type EtcdTieredStore, openEtcdTiered } from '../../../src/store/etcd-tier/tiered.ts';
import { ForwardingStore } from '../../../src/store/forwarding-store.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { CommitResult, LedgerOp, Revision, Store } from '../../../src/store/store.ts';
import { type EtcdCluster, startEtcd } from '../../helpers/etcd.ts';
import { tempDir } from '../../helpers/processes.ts';

const FIXTURE = JSON.parse(
  readFileSync(new URL('../../fixtures/etcd-legacy/two-nodes.json', import.meta.url), 'utf8'),
) as Record<string, string>;

interface OldBlock {
  affinity?: string;
  allocations: Record<string, [string, string, string]>;
  resting: Record<string, number>;
}

/** The old blocks of the fixture, by block key. */
const OLD_BLOCKS = new Map(
  Object.entries(FIXTURE)
    .filter(([k]) => k.startsWith('units/') && k.includes('#'))
    .map(([k, v]) => [k.slice('units/'.length), JSON.parse(v) as OldBlock]),
);

/** Address → [node, containerID] of every allocation the old store held. */
function heldOf(node?: string): Map<string, [string, string]> {
  const out = new Map<string, [string, string]>();
  for (const doc of OLD_BLOCKS.values()) {
    if (node !== undefined && doc.affinity !== node) continue;
    for (const [address, [, cid]] of Object.entries(doc.allocations)) out.set(address, [doc.affinity ?? '', cid]);
  }
  return out;
}

const R1 = parseIpamConfig({ type: 'warren', range: '10.77.0.0/24', block_size: 28, network_name: 'legacy' }).ranges;
const R2 = parseIpamConfig({ type: 'warren', range: '10.78.0.0/22', network_name: 'legacy2' }).ranges;

let etcd: EtcdCluster;
let client: Etcd3;
let serial = 0;
before(async () => {
  etcd = await startEtcd(1);
  client = new Etcd3({ hosts: etcd.endpoints });
});
after(async () => {
  client?.close();
  await etcd?.stop();
});

/** A fresh prefix holding the fixture. */
async function seeded(): Promise<string> {
  serial += 1;
  const prefix = `/legacy-${process.pid}-${serial}/`;
  for (const [key, value] of Object.entries(FIXTURE)) await client.put(`${prefix}${key}`).value(value);
  return prefix;
}

async function keys(prefix: string, under: string): Promise<string[]> {
  return (await client.getAll().prefix(`${prefix}${under}`).keys()).map((k) => k.slice(prefix.length)).sort();
}

const clock = new ManualClock(Date.now());

function open(prefix: string, node: string, local: Store, notices: string[] = []): Promise<EtcdTieredStore> {
  return openEtcdTiered({
    local,
    node,
    clock,
    endpoints: etcd.endpoints,
    prefix,
    leaseSeconds: 15,
    notice: (m) => notices.push(m),
  });
}

/** A node's SQLite file that dies (throws, as a killed process stops) at its `crashAt`-th commit. */
class CrashingStore extends ForwardingStore {
  #commits = 0;
  readonly #crashAt: number;
  constructor(inner: Store, crashAt: number) {
    super(inner);
    this.#crashAt = crashAt;
  }
  override commit(pool: string, expected: Revision, ops: readonly LedgerOp[]): Promise<CommitResult> {
    this.#commits += 1;
    if (this.#commits === this.#crashAt) return Promise.reject(new Error('killed mid-import'));
    return this.inner.commit(pool, expected, ops);
  }
}

/** Every allocation the local file holds, as address → containerID, failing on any address held twice. */
async function localHeld(store: Store): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const a of await store.list()) {
    assert.ok(!out.has(a.address), `${a.address} is held twice`);
    out.set(a.address, a.containerID);
  }
  return out;
}

describe('moving the old etcd layout to the two-tier store', () => {
  it("imports a node's old blocks with their full records, claims every old block in its node's name, removes only that node's old documents, and hands out no address the old store held", async () => {
    const prefix = await seeded();
    const path = join(tempDir(), 'n1.db');
    const notices: string[] = [];
    const n1 = await open(prefix, 'n1', new SqliteStore({ path }), notices);
    try {
      const held = await localHeld(n1);
      assert.deepEqual(
        [...held].sort(),
        [...heldOf('n1')].map(([address, [, cid]]) => [address, cid]).sort(),
        "every allocation of n1's old blocks is in its file, once",
      );
      const record = (await n1.list({ containerID: 'n1-c4' }))[0] as Allocation;
      assert.equal(record.podUID, 'uid-n1-4', 'the full owner record came along');
      assert.equal(record.netns, '/var/run/netns/n1-c4');
      const resting = await n1.readLedger('10.77.0.0/24@legacy#10.77.0.0/28');
      assert.equal(resting.kind, 'snapshot');
      assert.deepEqual(resting.kind === 'snapshot' ? resting.resting.map((r) => r.address).sort() : [], [
        '10.77.0.1',
        '10.77.0.2',
        '10.77.0.3',
      ]);
      const tier = n1.etcd;
      assert.deepEqual((await tier.claimsOf('n1')).map((c) => c.key).sort(), [
        '10.77.0.0/24@legacy#10.77.0.0/28',
        '10.77.0.0/24@legacy#10.77.0.16/28',
        '10.78.0.0/22@legacy2#10.78.0.0/26',
      ]);
      assert.deepEqual(
        (await tier.claimsOf('n2')).map((c) => c.key),
        ['10.77.0.0/24@legacy#10.77.0.32/28'],
        'a node that has not started again keeps its blocks, claimed in its name',
      );
      assert.deepEqual(await keys(prefix, 'units/'), [
        'units/10.77.0.0/24@legacy',
        'units/10.77.0.0/24@legacy#10.77.0.32/28',
      ]);
      assert.ok(
        (await keys(prefix, 'owners/')).every((k) => k.includes('/n2-')),
        "only n2's owner records are left",
      );
      assert.ok(
        notices.some((m) => /3 blocks with 20 allocations imported/.test(m)),
        notices.join('\n'),
      );

      // The old /26 split stands: the two-tier store's own size for a /22 would differ.
      const allocator = new Allocator({ store: n1, clock, node: 'n1', blocks: true });
      const oldHeld = heldOf();
      for (let i = 0; i < 40; i++) {
        const [a] = await allocator.allocate({
          owner: { network: 'legacy-net', containerID: `new-${i}`, ifname: 'eth0' },
          ranges: R1,
        });
        const address = a?.allocation.address as string;
        assert.ok(!oldHeld.has(address), `ADD ${i} returned ${address}, held by ${oldHeld.get(address)?.join(' ')}`);
      }
      const [b] = await allocator.allocate({
        owner: { network: 'legacy-net2', containerID: 'new-r2', ifname: 'net1' },
        ranges: R2,
      });
      assert.equal(
        b?.allocation.pool,
        '10.78.0.0/22@legacy2#10.78.0.0/26',
        'the old block of the range, at its old size',
      );
      assert.ok(!oldHeld.has(b?.allocation.address as string));
      // DEL of a migrated allocation releases it.
      const released = await allocator.release({ network: 'legacy-net', containerID: 'n1-c5', ifname: 'eth0' });
      assert.deepEqual(
        released.map((a) => a.address),
        ['10.77.0.6'],
      );
      assert.deepEqual(await n1.list({ containerID: 'n1-c5' }), []);
    } finally {
      await n1.close();
    }
    // n2 comes back: its blocks come in, and nothing of the old layout is left.
    const n2 = await open(prefix, 'n2', new SqliteStore({ path: join(tempDir(), 'n2.db') }));
    try {
      assert.deepEqual(
        [...(await localHeld(n2))].sort(),
        [...heldOf('n2')].map(([address, [, cid]]) => [address, cid]).sort(),
      );
      assert.deepEqual(await keys(prefix, 'units/'), []);
      assert.deepEqual(await keys(prefix, 'owners/'), []);
      assert.deepEqual((await n2.etcd.legacyLeft()).blocks, {});
    } finally {
      await n2.close();
    }
  });

  for (const crashAt of [1, 2, 3]) {
    it(`a crash at the import's local commit ${crashAt} then a restart ends with every allocation once and each block claimed once`, async () => {
      const prefix = await seeded();
      const path = join(tempDir(), 'n1.db');
      const dying = new SqliteStore({ path });
      await assert.rejects(open(prefix, 'n1', new CrashingStore(dying, crashAt)), /killed mid-import/);
      await dying.close();
      assert.equal((await keys(prefix, 'units/')).length, 6, 'no old document goes before the import committed');
      const again = await open(prefix, 'n1', new SqliteStore({ path }));
      try {
        assert.deepEqual(
          [...(await localHeld(again))].sort(),
          [...heldOf('n1')].map(([address, [, cid]]) => [address, cid]).sort(),
        );
        const claims = await keys(prefix, 'blocks/');
        assert.equal(claims.length, 4, claims.join('\n'));
        assert.equal((await again.etcd.claimsOf('n1')).length, 3);
        assert.deepEqual(await keys(prefix, 'units/'), [
          'units/10.77.0.0/24@legacy',
          'units/10.77.0.0/24@legacy#10.77.0.32/28',
        ]);
      } finally {
        await again.close();
      }
    });
  }

  it('a crash after the import committed but before the old documents went imports nothing twice at the restart', async () => {
    const prefix = await seeded();
    const path = join(tempDir(), 'n1.db');
    await (await open(prefix, 'n1', new SqliteStore({ path }))).close();
    // The documents back, as a crash before their removal leaves them.
    for (const [key, value] of Object.entries(FIXTURE))
      if (key.startsWith('units/') || key.startsWith('owners/')) await client.put(`${prefix}${key}`).value(value);
    const again = await open(prefix, 'n1', new SqliteStore({ path }));
    try {
      assert.equal((await localHeld(again)).size, heldOf('n1').size);
      assert.equal((await again.etcd.claimsOf('n1')).length, 3);
      assert.ok((await keys(prefix, 'units/')).every((k) => !k.includes('10.77.0.0/28') && !k.includes('10.78.')));
    } finally {
      await again.close();
    }
  });

  it('says so when a node still holding old blocks is announced (an agent of the old version runs there)', async () => {
    const prefix = await seeded();
    const old = await openEtcdTier({ endpoints: etcd.endpoints, prefix, leaseSeconds: 15 });
    const notices: string[] = [];
    try {
      await old.membership.announce('n2', { since: 1, version: 'old' });
      const n1 = await open(prefix, 'n1', new SqliteStore({ path: join(tempDir(), 'n1.db') }), notices);
      await n1.close();
      assert.ok(
        notices.some((m) => /node n2 is announced but still holds blocks in the old etcd layout/.test(m)),
        notices.join('\n'),
      );
    } finally {
      await old.close();
    }
  });

  it('gives an old block no node held, holding an address another node borrowed, to that node: never handed out again', async () => {
    const prefix = await seeded();
    const block = '10.77.0.0/24@legacy#10.77.0.48/28';
    const borrowed = {
      pool: block,
      address: '10.77.0.50',
      network: 'legacy-net',
      containerID: 'n2-borrowed',
      ifname: 'eth0',
      node: 'n2',
      createdAt: 1,
    };
    const doc = { allocations: { '10.77.0.50': ['legacy-net', 'n2-borrowed', 'eth0'] }, resting: {} };
    await client.put(`${prefix}units/${block}`).value(JSON.stringify(doc));
    await client
      .put(`${prefix}owners/legacy-net/n2-borrowed/eth0/10.77.0.0%2F24%40legacy`)
      .value(JSON.stringify(borrowed));
    const n1 = await open(prefix, 'n1', new SqliteStore({ path: join(tempDir(), 'n1.db') }));
    try {
      assert.equal((await n1.etcd.claimOf(block))?.node, 'n2');
      const allocator = new Allocator({ store: n1, clock, node: 'n1', blocks: true });
      for (let i = 0; i < 60; i++) {
        const [a] = await allocator.allocate({
          owner: { network: 'legacy-net', containerID: `fill-${i}`, ifname: 'eth0' },
          ranges: R1,
        });
        assert.notEqual(a?.allocation.address, '10.77.0.50', `ADD ${i} handed out the borrowed address`);
      }
    } finally {
      await n1.close();
    }
    const n2 = await open(prefix, 'n2', new SqliteStore({ path: join(tempDir(), 'n2.db') }));
    try {
      assert.deepEqual(
        (await n2.list({ containerID: 'n2-borrowed' })).map((a) => a.address),
        ['10.77.0.50'],
      );
    } finally {
      await n2.close();
    }
  });

  it('forgetting a node that never came back frees its old blocks and removes its old documents for good', async () => {
    const prefix = await seeded();
    const n1 = await open(prefix, 'n1', new SqliteStore({ path: join(tempDir(), 'n1.db') }));
    try {
      assert.deepEqual((await n1.etcd.legacyLeft()).blocks, { n2: 1 });
      const freed = await n1.cluster.owners.forgetNode('n2');
      assert.deepEqual(freed, ['10.77.0.0/24@legacy#10.77.0.32/28']);
      assert.deepEqual(await keys(prefix, 'units/'), []);
      assert.deepEqual(await keys(prefix, 'owners/'), []);
    } finally {
      await n1.close();
    }
    // A later start claims nothing in n2's name again.
    const later = await open(prefix, 'n3', new SqliteStore({ path: join(tempDir(), 'n3.db') }));
    try {
      assert.deepEqual(await later.etcd.claimsOf('n2'), []);
    } finally {
      await later.close();
    }
  });
});
