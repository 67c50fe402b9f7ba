/**
 * Pod sandbox start through containerd's CRI, with Warren as the IPAM beside host-local, in one
 * run on one containerd (Debian's 1.6, CRI enabled, private config: test/helpers/cri.ts).
 *
 * The node's primary config is bridge + host-local. The bench switches IPAMs without touching the
 * primary by writing Warren's own 00-warren.conflist (the same bridge and subnet, Warren as its
 * IPAM) before it, or removing it: containerd uses the first config of its conf dir.
 * (The agent's config manager no longer removes its file while a readiness indicator is missing:
 * it fails closed, its plugin answering "not ready", so it cannot be the switch.) Rounds alternate
 * between the two so
 * that the machine's drift hits both alike; each switch waits until a probe sandbox shows which
 * IPAM containerd now calls (Warren records the sandbox's allocation, host-local does not).
 *
 * Measured per round: sequential RunPodSandbox (each timed alone; stop and remove untimed), and
 * 20 RunPodSandbox at once (the wall time of the burst and each call's time).
 *
 * Usage: node bench/cri.ts [--quick]   (root; containerd, runc, busybox-static, CNI plugins)
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentHandle } from '../test/helpers/agent.ts';
import { type CriContainerd, criBinDir, startCriContainerd } from '../test/helpers/cri.ts';
import { bridgeName, deleteLink } from '../test/helpers/netns.ts';
import { waitFor } from '../test/helpers/processes.ts';
import { loadavg, machineLine } from './machine.ts';
import { benchAgent } from './plugins.ts';
import { tail } from './stats.ts';

const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 2 : 4;
/** 25 a round, 100 per IPAM over 4 rounds: enough for a p90 (bench/stats.ts). */
const SEQUENTIAL = quick ? 10 : 25;
const BURST = 20;
const NETWORK = 'wrn-bench-cri';

type Ipam = 'host-local' | 'warren';

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0
    ? Number.NaN
    : s.length % 2 === 1
      ? (s[(s.length - 1) / 2] as number)
      : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2;
};

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'warren-bench-cri-'));
  const confDir = join(work, 'net.d');
  const warrenFile = join(confDir, '00-warren.conflist');
  const bridge = bridgeName();
  let containerd: CriContainerd | undefined;
  let agent: AgentHandle | undefined;
  let pods = 0;
  try {
    mkdirSync(confDir);
    containerd = await startCriContainerd({ binDir: criBinDir(), confDir });
    const primary = {
      cniVersion: '1.0.0',
      name: NETWORK,
      plugins: [
        {
          type: 'bridge',
          bridge,
          isGateway: true,
          ipMasq: false,
          ipam: { type: 'host-local', subnet: '10.246.0.0/20', dataDir: join(work, 'host-local') },
        },
      ],
    };
    writeFileSync(join(confDir, '.primary.tmp'), JSON.stringify(primary));
    renameSync(join(confDir, '.primary.tmp'), join(confDir, '10-bridge.conflist'));
    agent = await benchAgent({ dir: join(work, 'agent'), args: ['--containerd', 'off'] });
    // Warren's config: the primary's bridge with Warren as its IPAM on the same subnet (a bridge
    // holds one gateway address; every sandbox of one IPAM is removed before the other serves).
    // Written first in the conf dir, containerd uses it; removed, containerd uses the primary.
    const warrenConf = {
      ...primary,
      plugins: [{ ...primary.plugins[0], ipam: { type: 'warren', socket: agent.socket, range: '10.246.0.0/20' } }],
    };
    const c = containerd;
    const a = agent;
    const run = async (): Promise<{ id: string; ms: number }> => {
      pods += 1;
      const t0 = performance.now();
      const id = await c.cri.runPodSandbox({
        name: `bench-${pods}`,
        uid: `bench-uid-${pods}`,
        namespace: 'warren-bench',
      });
      return { id, ms: performance.now() - t0 };
    };
    const remove = async (id: string): Promise<void> => {
      await c.cri.stopPodSandbox(id);
      await c.cri.removePodSandbox(id);
    };
    const switchTo = async (ipam: Ipam): Promise<void> => {
      if (ipam === 'warren') {
        writeFileSync(join(confDir, '.warren.tmp'), JSON.stringify(warrenConf));
        renameSync(join(confDir, '.warren.tmp'), warrenFile);
      } else if (existsSync(warrenFile)) unlinkSync(warrenFile);
      await waitFor(
        `containerd to call ${ipam}`,
        async () => {
          const { id } = await run();
          const byWarren = (await a.allocations(`?containerID=${id}`)).length > 0;
          await remove(id);
          return byWarren === (ipam === 'warren') ? true : undefined;
        },
        30_000,
      );
    };
    const figures: Record<Ipam, { sequential: number[]; burstWall: number[]; burstEach: number[] }> = {
      'host-local': { sequential: [], burstWall: [], burstEach: [] },
      warren: { sequential: [], burstWall: [], burstEach: [] },
    };
    const loadBefore = loadavg();
    for (let round = 0; round < ROUNDS; round++) {
      for (const ipam of (round % 2 === 0 ? ['host-local', 'warren'] : ['warren', 'host-local']) as Ipam[]) {
        await switchTo(ipam);
        for (let i = 0; i < SEQUENTIAL; i++) {
          const { id, ms } = await run();
          figures[ipam].sequential.push(ms);
          await remove(id);
        }
        const t0 = performance.now();
        const burst = await Promise.all(Array.from({ length: BURST }, () => run()));
        figures[ipam].burstWall.push(performance.now() - t0);
        figures[ipam].burstEach.push(...burst.map((b) => b.ms));
        await Promise.all(burst.map((b) => remove(b.id)));
      }
      process.stderr.write(`round ${round + 1}/${ROUNDS} done; load ${loadavg()}\n`);
    }
    const hl = figures['host-local'];
    const w = figures.warren;
    const f = (x: number): string => x.toFixed(0);
    console.log(machineLine());
    const load = `load ${loadBefore} → ${loadavg()}`;
    console.log(`containerd 1.6 with CRI, bridge plugin; ${ROUNDS} alternating rounds; ${load}`);
    console.log('| RunPodSandbox | host-local | Warren | Warren / host-local |');
    console.log('|---|---|---|---|');
    console.log(
      `| sequential, median ms (${hl.sequential.length} each) | ${f(median(hl.sequential))} | ${f(median(w.sequential))} | ${(median(w.sequential) / median(hl.sequential)).toFixed(2)}× |`,
    );
    const [hlTail, wTail] = [tail(hl.sequential, 0.9), tail(w.sequential, 0.9)];
    const tailRatio = (wTail.value / hlTail.value).toFixed(2);
    const tailRow = `sequential, ${hlTail.label} ms (n=${hlTail.n})`;
    console.log(`| ${tailRow} | ${f(hlTail.value)} | ${f(wTail.value)} | ${tailRatio}× |`);
    console.log(
      `| ${BURST} at once, wall ms (median of ${hl.burstWall.length}) | ${f(median(hl.burstWall))} | ${f(median(w.burstWall))} | ${(median(w.burstWall) / median(hl.burstWall)).toFixed(2)}× |`,
    );
    console.log(
      `| ${BURST} at once, each call median ms | ${f(median(hl.burstEach))} | ${f(median(w.burstEach))} | ${(median(w.burstEach) / median(hl.burstEach)).toFixed(2)}× |`,
    );
  } finally {
    const results = '/var/lib/cni/results';
    if (existsSync(results))
      for (const name of readdirSync(results))
        if (name.startsWith(`${NETWORK}-`)) rmSync(join(results, name), { force: true });
    await containerd?.stop();
    await agent?.kill();
    await deleteLink(bridge);
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
