/**
 * The two-tier store (src/store/tiered/store.ts) holds the Store contract on the node's SQLite file
 * and a cluster tier in memory; its two-tier behaviour is tested in tiered-*.test.ts beside it.
 */
import { join } from 'node:path';
import { ManualClock } from '../../../src/core/clock.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { Store } from '../../../src/store/store.ts';
import { TieredStore } from '../../../src/store/tiered/store.ts';
import { tempDir } from '../../helpers/processes.ts';
import { storeConformance } from '../conformance.ts';
import { MemoryTier } from './memory-tier.ts';

const opened = new WeakMap<Store, { path: string; tier: MemoryTier }>();

function tiered(path: string, tier: MemoryTier): TieredStore {
  const store = new TieredStore({
    local: new SqliteStore({ path }),
    tier,
    node: 'n1',
    clock: new ManualClock(1_000),
  });
  opened.set(store, { path, tier });
  return store;
}

storeConformance('tiered: SQLite file and a memory cluster', {
  async create() {
    return tiered(join(tempDir(), 'warren.db'), new MemoryTier({ clock: new ManualClock(1_000) }));
  },
  async reopen(store) {
    const { path, tier } = opened.get(store) as { path: string; tier: MemoryTier };
    return tiered(path, tier);
  },
});
