/**
 * Chaos: 1,000 container lifecycles (ADD, then DEL) through the real plugin executable while the
 * agent is SIGKILLed and restarted at random moments, and CNI GC runs beside them. The "runtime"
 * here behaves like kubelet: it retries a failed ADD until it succeeds, a DEL always succeeds (the
 * plugin journals it when the agent is down), and now and then it loses a DEL altogether. Its GC
 * lists the attachments whose ADD it has seen succeed, so an ADD still in flight is missing from
 * the list — the race a GC grace exists for. Right before the runtime is done with a container
 * (its DEL, or losing it), the container still holds exactly the address its ADD reported. At the
 * end: every live container holds exactly one address, no address is held twice, every deleted
 * container's address is free, the containers whose DEL was lost are freed by GC, and the journal
 * is empty.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import type { ReconcilerStatus } from '../../src/agent/release/reconciler.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { HANG_BOUND_MS, waitFor } from '../helpers/processes.ts';
import { mulberry32 } from '../helpers/random.ts';

const LIFECYCLES = Number(process.env.WARREN_CHAOS_LIFECYCLES ?? 1000);
const LIVE_AT_END = 40;
const WORKERS = 8;
/** Every this many lifecycles, the runtime loses the DEL: only GC can free the address. */
const LOST_DEL_EVERY = 50;
/** A GC is started after this many plugin calls; at most two run at once. */
const GC_EVERY_CALLS = 25;
/**
 * Seconds a new allocation is spared by GC: far longer than an ADD's reply takes to land, also on
 * a loaded machine (the agent's default). At 5 s, with 8 busy loops beside the suite, a reply that
 * landed after a GC had taken its list made that GC free a live container's address.
 */
const GC_GRACE = 60;

describe('chaos', () => {
  const agents: AgentHandle[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
  });

  it(`survives ${LIFECYCLES} lifecycles with the agent killed at random moments`, {
    timeout: 20 * 60_000,
  }, async () => {
    const seed = Number(process.env.WARREN_CHAOS_SEED ?? Date.now() % 1_000_000);
    console.log(`# chaos seed ${seed}`);
    const random = mulberry32(seed);
    const args = ['--gc-grace', String(GC_GRACE)];
    let agent = await startAgent({ args });
    agents.push(agent);
    const dir = agent.dir;
    const socket = agent.socket;
    const journal = join(dir, 'journal');
    const conf = {
      cniVersion: '1.0.0',
      name: 'chaos',
      ipam: { type: 'warren', socket, journal_dir: journal, range: '10.225.0.0/16' },
    };
    const held = new Map<string, string>(); // live container -> address its last successful ADD reported
    const deleted = new Set<string>();
    const lost = new Set<string>(); // DEL never sent
    const unexpected: string[] = [];
    let gcs = 0;
    let gcRefused = 0;
    const gcsInFlight = new Set<Promise<void>>();
    /** The runtime's GC: every attachment whose ADD it saw succeed is valid, nothing else. */
    const gc = async (): Promise<number | null> => {
      const valid = [...held.keys()].map((containerID) => ({ containerID, ifname: 'eth0' }));
      const r = await warren({
        command: 'GC',
        config: { ...conf, cniVersion: '1.1.0', 'cni.dev/valid-attachments': valid },
      });
      gcs += 1;
      if (r.code !== 0 && r.json?.code === 11)
        gcRefused += 1; // the agent was down: GC is not journaled
      else if (r.code !== 0) unexpected.push(`GC: ${r.stdout}`);
      return r.code;
    };

    // The killer: after a random number of completed plugin calls, SIGKILL and restart the agent.
    let calls = 0;
    let callsSinceGc = 0;
    let kills = 0;
    let nextKillAt = 30 + Math.floor(random() * 120);
    let restarting: Promise<void> | undefined;
    const afterCall = (): void => {
      calls += 1;
      callsSinceGc += 1;
      if (callsSinceGc >= GC_EVERY_CALLS && gcsInFlight.size < 2) {
        callsSinceGc = 0;
        const running: Promise<void> = gc()
          .then(() => undefined)
          .finally(() => gcsInFlight.delete(running));
        gcsInFlight.add(running);
      }
      if (calls < nextKillAt || restarting !== undefined) return;
      nextKillAt = calls + 30 + Math.floor(random() * 150);
      kills += 1;
      restarting = (async () => {
        await agent.kill();
        agent = await startAgent({ dir, args });
        agents.push(agent);
      })().finally(() => (restarting = undefined));
    };

    /** The addresses the store holds for a container now; waits out a restart of the agent. */
    const heldBy = (id: string): Promise<string[]> =>
      waitFor(`the allocations of ${id}`, async () => {
        await restarting;
        const r = await requestJson({
          socket,
          method: 'GET',
          path: `/v1/allocations?network=chaos&containerID=${id}`,
          timeoutMs: 5_000,
        });
        return r.status === 200 ? (r.body as Allocation[]).map((a) => a.address) : undefined;
      });

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
      // Still holding its address when the runtime is done with it: a loss mid-run (a stale
      // release, a GC that raced the ADD) would otherwise go unseen, as this container leaves.
      const holding = await heldBy(id);
      if (holding.join() !== held.get(id))
        unexpected.push(
          `${id} held ${JSON.stringify(holding)} before its DEL, not the ${held.get(id)} its ADD reported`,
        );
      if (i % LOST_DEL_EVERY === LOST_DEL_EVERY - 1) {
        // The runtime forgets this container without a DEL: it drops out of GC's list.
        held.delete(id);
        lost.add(id);
        return;
      }
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
    await Promise.all(gcsInFlight);
    console.log(
      `# ${calls} plugin calls, ${kills} kills, ${addRetries} ADD retries, ${gcs} GCs (${gcRefused} while the agent was down), ${lost.size} DELs lost`,
    );
    assert.deepEqual(unexpected, []);
    assert.ok(kills >= 3, `the agent was killed ${kills} times`);
    assert.ok(gcs - gcRefused >= 6, `GC ran ${gcs - gcRefused} times beside the lifecycles`);

    // The lost DELs: GC frees them once they are older than the grace (polled, not slept).
    await waitFor(
      'GC to free the containers whose DEL was lost',
      async () => {
        if ((await gc()) !== 0) return undefined;
        const stored = await agent.allocations('?network=chaos');
        return stored.some((a) => lost.has(a.containerID)) ? undefined : true;
      },
      GC_GRACE * 1000 + HANG_BOUND_MS,
    );
    assert.deepEqual(unexpected, []);

    await waitFor('the journal to drain', async () => {
      const s = (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/journal' }))
        .body as ReconcilerStatus;
      const files = readdirSync(journal).filter((n) => n.endsWith('.release'));
      return s.pending.length === 0 && files.length === 0 ? true : undefined;
    });
    const stored = await agent.allocations('?network=chaos');
    const byContainer = new Map<string, string[]>();
    for (const a of stored) byContainer.set(a.containerID, [...(byContainer.get(a.containerID) ?? []), a.address]);
    assert.equal(new Set(stored.map((a) => a.address)).size, stored.length, 'no address is held twice');
    for (const [id, address] of held)
      assert.deepEqual(byContainer.get(id), [address], `${id} holds exactly the address it was given`);
    for (const id of deleted) assert.equal(byContainer.has(id), false, `${id} was deleted and holds nothing`);
    for (const id of lost) assert.equal(byContainer.has(id), false, `${id} lost its DEL and GC freed it`);
    assert.equal(stored.length, LIVE_AT_END, 'nothing but the live containers holds an address');
    assert.equal(held.size, LIVE_AT_END);
  });
});
