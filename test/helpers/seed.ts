/**
 * Seeds an agent's SQLite database before the agent starts, as if earlier ADDs had made these
 * allocations long ago (created at time 0, so no grace period protects them).
 */
import { join } from 'node:path';
import { ManualClock } from '../../src/core/clock.ts';
import { type IPAddress, parseIP } from '../../src/ipam/address.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { Allocator } from '../../src/allocator/allocator.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';

export interface Seed {
  readonly containerID: string;
  readonly address: string;
  readonly netns?: string;
  readonly podName?: string;
  readonly podUID?: string;
}

export async function seedAllocations(
  stateDir: string,
  network: string,
  range: string,
  seeds: readonly Seed[],
): Promise<void> {
  const store = new SqliteStore({ path: join(stateDir, 'warren.db') });
  const allocator = new Allocator({ store, clock: new ManualClock(0), node: 'test-node' });
  const ranges = parseIpamConfig({ type: 'warren', range }).ranges;
  try {
    for (const s of seeds) {
      await allocator.allocate({
        owner: { network, containerID: s.containerID, ifname: 'eth0' },
        ranges,
        requested: [parseIP(s.address) as IPAddress],
        ...(s.netns === undefined ? {} : { netns: s.netns }),
        ...(s.podName === undefined ? {} : { podName: s.podName, podNamespace: 'default' }),
        ...(s.podUID === undefined ? {} : { podUID: s.podUID }),
      });
    }
  } finally {
    await store.close();
  }
}
