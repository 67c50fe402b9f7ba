/**
 * `warren allocations` follows the agent's pages (GET /v1/allocations with limit and continue): more
 * allocations than one page holds all come back once, in the order the whole listing gave (pool, age,
 * address), while the agent never lists its whole store (the listing is made to fail). Against the
 * agent's API server in process (test/api/harness.ts), the CLI as an operator runs it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DEFAULT_ALLOCATION_PAGE } from '../../src/api/protocol.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { type Harness, harness } from '../api/harness.ts';
import { WARREN_BIN, run } from '../helpers/processes.ts';

describe('warren allocations, a page at a time', () => {
  let h: Harness;
  const count = DEFAULT_ALLOCATION_PAGE + 37;
  before(async () => {
    h = await harness();
    for (let i = 0; i < count; i++) {
      if (i % 100 === 0) h.clock.advance(1_000); // ages that differ: the order is by age within a pool
      const outcome = await h.client.cni({
        command: 'ADD',
        containerID: `p${i}`,
        netns: `/var/run/netns/p${i}`,
        ifname: 'eth0',
        config: { cniVersion: '1.0.0', name: 'paged', ipam: { type: 'warren', range: '10.33.0.0/22' } },
      });
      assert.equal(outcome.kind, 'result');
    }
  });
  after(async () => h.close());

  it('lists more than a page, each once, in the whole listing order, without the agent listing its whole store', async () => {
    const whole = await h.client.allocations();
    h.store.listFault = new Error('the whole store was listed');
    try {
      const r = await run(process.execPath, [WARREN_BIN, 'allocations', '--json', '--socket', h.socket]);
      assert.equal(r.code, 0, r.stderr);
      const listed = JSON.parse(r.stdout) as Allocation[];
      assert.equal(listed.length, count);
      assert.deepEqual(
        listed.map((a) => a.address),
        whole.map((a) => a.address),
      );
    } finally {
      h.store.listFault = undefined;
    }
  });
});
