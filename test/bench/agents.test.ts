/**
 * Every agent a bench starts serves metrics on a port of its own, and one that could not bind its
 * metrics port is caught rather than measured as if it served them: in `npm run bench` every
 * agent after the first ran without metrics, its port (9464) taken by the first (issue 25 item 10).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { metricsAddress, residentMiB } from '../../bench/agents.ts';
import { benchAgent } from '../../bench/plugins.ts';
import { startAgent } from '../helpers/agent.ts';

describe('bench agents', () => {
  it('gives two agents started one after the other each its own metrics port', async () => {
    const first = await benchAgent();
    try {
      const second = await benchAgent();
      try {
        const [a, b] = [await metricsAddress(first.socket), await metricsAddress(second.socket)];
        assert.notEqual(a, b);
        assert.doesNotMatch(a, /:9464$/);
      } finally {
        await second.stop();
      }
    } finally {
      await first.stop();
    }
  });

  it('refuses an agent whose metrics port is taken instead of measuring it without metrics', async () => {
    const holder = await benchAgent();
    try {
      const taken = await metricsAddress(holder.socket);
      const loser = await startAgent({ args: ['--metrics-address', taken] });
      try {
        await assert.rejects(metricsAddress(loser.socket), /could not serve metrics/);
      } finally {
        await loser.stop();
      }
    } finally {
      await holder.stop();
    }
  });

  it("reads an agent's resident memory from /proc", async () => {
    const agent = await benchAgent();
    try {
      const { rss, peak } = residentMiB(agent.pid);
      assert.ok(rss > 10 && peak >= rss, `rss ${rss} MiB, peak ${peak} MiB`);
    } finally {
      await agent.stop();
    }
  });
});
