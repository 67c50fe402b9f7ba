/**
 * Chaos: 1,000 container lifecycles (ADD, then DEL) through the real plugin executable while the
 * agent is SIGKILLed and restarted at random moments. The "runtime" here behaves like kubelet:
 * it retries a failed ADD until it succeeds, and a DEL always succeeds (the plugin journals it
 * when the agent is down). At the end: every live container holds exactly one address, no
 * address is held twice, every deleted container's address is free, and the journal is empty.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import type { ReconcilerStatus } from '../../src/agent/release-reconciler.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { waitFor } from '../helpers/processes.ts';

const LIFECYCLES = Number(process.env.WARREN_CHAOS_LIFECYCLES ?? 1000);
const LIVE_AT_END = 40;
const WORKERS = 8;

/** A small seeded PRNG, so a failing run can be replayed with WARREN_CHAOS_SEED. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('chaos', () => {
  const agents: AgentHandle[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
  });

  it(`survives ${LIFECYCLES} lifecycles with the agent killed at random moments`, { timeout: 20 * 60_000 }, async () => {
    const seed = Number(process.env.WARREN_CHAOS_SEED ?? Date.now() % 1_000_000);
    console.log(`# chaos seed ${seed}`);
    const random = mulberry32(seed);
    let agent = await startAgent();
    agents.push(agent);
    const dir = agent.dir;
    const socket = agent.socket;
    const journal = join(dir, 'journal');
    const conf = { cniVersion: '1.0.0', name: 'chaos', ipam: { type: 'warren', socket, journal_dir: journal, range: '10.225.0.0/16' } };

    // The killer: after a random number of completed plugin calls, SIGKILL and restart the agent.
    let calls = 0;
    let kills = 0;
    let nextKillAt = 30 + Math.floor(random() * 120);
    let restarting: Promise<void> | undefined;
    const afterCall = (): void => {
      calls += 1;
      if (calls < nextKillAt || restarting !== undefined) return;
      nextKillAt = calls + 30 + Math.floor(random() * 150);
      kills += 1;
      restarting = (async () => {
        await agent.kill();
        agent = await startAgent({ dir });
        agents.push(agent);
      })().finally(() => (restarting = undefined));
    };

    const held = new Map<string, string>(); // live container -> address its last successful ADD reported
    const deleted = new Set<string>();
    const unexpected: string[] = [];
    let addRetries = 0;
    let next = 0;
    const lifecycle = async (i: number): Promise<void> => {
      const id = `chaos-${i}`;
      const env = { containerID: id, netns: `/var/run/netns/${id}`, ifname: 'eth0', config: conf };
      for (let attempt = 1; ; attempt++) {
        const add = await warren({ command: 'ADD', ...env });
        afterCall();
        if (add.code === 0) {
          held.set(id, resultAddresses(add)[0] as string);
          break;
        }
        if (add.json?.code !== 11 || attempt > 50) {
          unexpected.push(`ADD ${id}: ${add.stdout}`);
          return;
        }
        addRetries += 1;
        // Like kubelet's retry: wait for the agent to come back (the event), not a fixed time.
        await restarting;
      }
      if (i >= LIFECYCLES - LIVE_AT_END) return; // these stay running
      const del = await warren({ command: 'DEL', ...env });
      afterCall();
      if (del.code !== 0) unexpected.push(`DEL ${id}: ${del.stdout}`);
      held.delete(id);
      deleted.add(id);
    };
    await Promise.all(
      Array.from({ length: WORKERS }, async () => {
        while (next < LIFECYCLES) await lifecycle(next++);
      }),
    );
    await restarting;
    console.log(`# ${calls} plugin calls, ${kills} kills, ${addRetries} ADD retries`);
    assert.deepEqual(unexpected, []);
    assert.ok(kills >= 3, `the agent was killed ${kills} times`);

    await waitFor(
      'the journal to drain',
      async () => {
        const s = (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/journal' })).body as ReconcilerStatus;
        const files = readdirSync(journal).filter((n) => n.endsWith('.release'));
        return s.pending.length === 0 && files.length === 0 ? true : undefined;
      },
      60_000,
    );
    const stored = await agent.allocations('?network=chaos');
    const byContainer = new Map<string, string[]>();
    for (const a of stored) byContainer.set(a.containerID, [...(byContainer.get(a.containerID) ?? []), a.address]);
    assert.equal(new Set(stored.map((a) => a.address)).size, stored.length, 'no address is held twice');
    for (const [id, address] of held) assert.deepEqual(byContainer.get(id), [address], `${id} holds exactly the address it was given`);
    for (const id of deleted) assert.equal(byContainer.has(id), false, `${id} was deleted and holds nothing`);
    assert.equal(stored.length, LIVE_AT_END, 'nothing but the live containers holds an address');
    assert.equal(held.size, LIVE_AT_END);
  });
});
