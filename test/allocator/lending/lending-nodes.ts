/**
 * Nodes that lend each other addresses, for unit tests: each a TieredStore on its own SQLite file
 * and a session of one MemoryTier (or of another cluster, `LendingCluster.open`), with an allocator
 * that splits ranges into blocks, on one ManualClock. `settle` drives an ADD that waits for grants:
 * it runs every node's lending round and steps the clock until the ADD is answered (bounded by
 * HANG_BOUND_MS of real time), each step once the process is quiet (no real work in flight).
 * `LendingCluster.closedAfterFile` makes the clusters of one test file, each closed when its tests end.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after } from 'node:test';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { LENT_NETWORK, MIGRATION_LENDER } from '../../../src/allocator/lending/loans.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { isBookkeeping } from '../../../src/ipam/bookkeeping.ts';
import type { ClusterTier } from '../../../src/store/tiered/cluster-tier.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { TieredStore } from '../../../src/store/tiered/store.ts';
import { quiet } from '../../helpers/event-loop.ts';
import { HANG_BOUND_MS, tempDir } from '../../helpers/processes.ts';
import { MemoryTier } from '../../store/tiered/memory-tier.ts';

export interface LendingNode {
  readonly name: string;
  readonly store: TieredStore;
  readonly allocator: Allocator;
}

/** How long an ADD waits for grants in these tests (on the manual clock). */
export const WAIT_MS = 5_000;
/** The clock step `settle` takes between lending rounds: the borrower's poll interval. */
export const STEP_MS = 250;

/** A session of another cluster than the MemoryTier (the Kubernetes tier on the fake API server), on the clock. */
export type ClusterSession = (clock: ManualClock) => Promise<ClusterTier>;

export class LendingCluster {
  readonly clock = new ManualClock(1_000_000);
  readonly tier = new MemoryTier({ clock: this.clock });
  /** The cluster the nodes share, for looking: the MemoryTier unless another was opened (`open`). */
  cluster: ClusterTier = this.tier;
  readonly nodes: LendingNode[] = [];
  readonly #dir = tempDir();

  constructor(names: readonly string[]) {
    for (const name of names) this.nodes.push(this.#node(name, this.tier.session()));
  }

  /**
   * A maker of clusters for the test file that calls this (at its top level): every cluster it
   * makes is closed once the file's tests end (node:test `after`).
   */
  static closedAfterFile(): (names: readonly string[]) => LendingCluster {
    const made: LendingCluster[] = [];
    after(async () => {
      for (const c of made) await c.close();
    });
    return (names) => {
      const c = new LendingCluster(names);
      made.push(c);
      return c;
    };
  }

  /** The same nodes on another cluster: each node's tier a session of it, and one more to look with. */
  static async open(names: readonly string[], session: ClusterSession): Promise<LendingCluster> {
    const c = new LendingCluster([]);
    c.cluster = await session(c.clock);
    for (const name of names) c.nodes.push(c.#node(name, await session(c.clock)));
    return c;
  }

  #node(name: string, tier: ClusterTier): LendingNode {
    const store = new TieredStore({
      local: new SqliteStore({ path: join(this.#dir, `${name}.db`) }),
      tier,
      node: name,
      clock: this.clock,
    });
    const allocator = new Allocator({ store, clock: this.clock, node: name, blocks: true, lendWaitMs: WAIT_MS });
    return { name, store, allocator };
  }

  /** Closes `name`'s store and opens it again on the same file (its agent restarted); MemoryTier only. */
  async restart(name: string): Promise<LendingNode> {
    const i = this.nodes.findIndex((n) => n.name === name);
    assert.ok(i >= 0 && this.cluster === this.tier, `no node ${name} on the MemoryTier`);
    await this.nodes[i]?.store.close();
    const again = this.#node(name, this.tier.session());
    this.nodes[i] = again;
    return again;
  }

  node(name: string): LendingNode {
    const found = this.nodes.find((n) => n.name === name);
    assert.ok(found, `no node ${name}`);
    return found;
  }

  /** One lending round on every node (graces long unless told). */
  async lendAll(o: { returnGraceMs?: number; orphanGraceMs?: number } = {}): Promise<void> {
    for (const n of this.nodes) {
      const report = await n.allocator.lend({
        returnGraceMs: o.returnGraceMs ?? 3_600_000,
        orphanGraceMs: o.orphanGraceMs ?? 3_600_000,
      });
      assert.deepEqual(report.errors, [], `${n.name}'s lending round`);
    }
  }

  /**
   * Runs lending rounds and steps the clock until `call` settles; its outcome. How many steps that
   * takes depends on what the ADD waits for, not on how long its real work takes (quiet).
   */
  async settle<T>(call: Promise<T>): Promise<T> {
    let done = false;
    call.then(
      () => {
        done = true;
      },
      () => {
        done = true;
      },
    );
    const end = Date.now() + HANG_BOUND_MS;
    await quiet();
    while (!done) {
      assert.ok(Date.now() < end, 'the ADD never settled');
      await this.lendAll();
      // Stepped only once the work before is done (the round's commits and syncs, the ADD's): the
      // ADD waits WAIT_MS of the clock for grants, which steps taken while it still worked would
      // spend on a loaded machine.
      await quiet();
      if (done) break;
      this.clock.advance(STEP_MS);
      await quiet();
    }
    return call;
  }

  /** Every allocation of every node's store, placeholders and marks included. */
  async everything(): Promise<Array<Allocation & { readonly store: string }>> {
    const out: Array<Allocation & { readonly store: string }> = [];
    for (const n of this.nodes) for (const a of await n.store.list()) out.push({ ...a, store: n.name });
    return out;
  }

  /**
   * Checks that no address is handed out twice across the nodes' stores, and that every grant in
   * the cluster has its lender's placeholder. Answers the addresses handed out.
   */
  async assertNoDuplicate(pool: string): Promise<string[]> {
    const all = await this.everything();
    // Placeholders, given-back and handed-over marks (every bookkeeping record) hold no container.
    const handedOut = all.filter((a) => !isBookkeeping(a));
    const seen = new Map<string, string>();
    for (const a of handedOut) {
      const other = seen.get(a.address);
      assert.equal(other, undefined, `${a.address} is held on ${other} and on ${a.store}`);
      seen.set(a.address, a.store);
    }
    for (const n of this.nodes) {
      const request = await this.cluster.requestOf(pool, n.name);
      for (const grant of request?.grants ?? []) {
        if (grant.lender === 'whereabouts') continue;
        const placeholder = all.find(
          (a) => a.store === grant.lender && a.network === LENT_NETWORK && a.address === grant.address,
        );
        assert.ok(placeholder, `${grant.address} granted to ${n.name} has no placeholder on ${grant.lender}`);
        assert.equal(placeholder.containerID, n.name);
      }
    }
    return [...seen.keys()];
  }

  async close(): Promise<void> {
    for (const n of this.nodes) await n.store.close();
    if (this.cluster !== this.tier) await this.cluster.close();
  }
}

/**
 * What `warren migrate whereabouts` writes for a pod on `node` holding `address` in range pool
 * `pool`: a grant with the pod's allocation as its holder, beside the grants and the wanted count
 * the request already has. Answers the holder.
 */
export async function recordMigrated(
  c: LendingCluster,
  pool: string,
  at: { readonly node: string; readonly address: string; readonly pod: string },
): Promise<Allocation> {
  const { node, address, pod } = at;
  const holder: Allocation = {
    pool,
    address,
    network: 'net',
    containerID: `sandbox-${pod}`,
    ifname: 'eth0',
    podNamespace: 'default',
    podName: pod,
    podUID: `uid-${pod}`,
    node,
    createdAt: c.clock.now(),
  };
  const request = (await c.tier.requestOf(pool, node)) ?? (await c.tier.ask(pool, node, 0));
  const grants = [...request.grants, { address, lender: MIGRATION_LENDER, holder }];
  assert.ok(await c.tier.updateRequest(request, grants, request.wanted), `the migration's grant of ${address}`);
  return holder;
}
