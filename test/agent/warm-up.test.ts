/**
 * The warm-up runs the ADD path before the agent serves, and leaves nothing of it behind: no
 * allocation, no pool, no counted call, no journal file.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { systemClock } from '../../src/core/clock.ts';
import type { AgentService } from '../../src/agent/service.ts';
import { warmUp } from '../../src/agent/warm-up.ts';
import { ApiClient } from '../../src/api/client.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { histogramCount, scrape } from '../helpers/prometheus.ts';

// The warm-up never calls the server's other routes, so it is given no service behind them.
const NO_SERVICE = {} as AgentService;

describe('the warm-up', () => {
  it('answers its own ADD, CHECK and DEL calls through the HTTP server and says how many', async () => {
    const report = await warmUp({ rounds: 12, clock: systemClock, node: 'n1', service: NO_SERVICE });
    // 12 ADDs, 12 DELs, a CHECK every 10th round: a call that failed would have thrown.
    assert.equal(report.calls, 12 + 12 + 2);
    assert.ok(report.ms > 0);
  });

  it('does nothing with no rounds', async () => {
    assert.deepEqual(await warmUp({ rounds: 0, clock: systemClock, node: 'n1', service: NO_SERVICE }), { calls: 0, ms: 0 });
  });

  it('can run twice at once in one process (each on its own private socket)', async () => {
    const [a, b] = await Promise.all([1, 2].map(() => warmUp({ rounds: 3, clock: systemClock, node: 'n1', service: NO_SERVICE })));
    assert.equal(a?.calls, 7);
    assert.equal(b?.calls, 7);
  });
});

describe('an agent that warmed up', () => {
  let agent: AgentHandle | undefined;
  after(async () => void (await agent?.stop()));

  it('holds no allocation and no pool, counted no CNI call and journaled nothing', async () => {
    agent = await startAgent({ args: ['--metrics-address', '127.0.0.1:0'] });
    assert.match(agent.log(), /"calls":\d+[^}]*"msg":"warmed up"/);
    const api = new ApiClient({ socket: agent.socket });
    assert.deepEqual(await agent.allocations(), []);
    assert.deepEqual(await api.pools(), []);
    const families = await scrape((await api.status()).metrics?.address as string);
    for (const command of ['ADD', 'CHECK', 'DEL']) {
      assert.equal(histogramCount(families, 'warren_cni_request_duration_seconds', { command }), 0, `${command} calls counted`);
    }
    assert.deepEqual(readdirSync(join(agent.dir, 'journal')).filter((f) => !f.startsWith('.') && f !== 'rejected'), []);
  });
});
