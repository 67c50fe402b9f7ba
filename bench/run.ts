/**
 * Warren beside its peers, in one run on one machine, fresh state for each:
 *   - process floor: bare `node -e 0`, sequential and 20 at a time;
 *   - plugin cold start (VERSION) against that floor;
 *   - ADD and DEL through the plugin executable vs the CNI reference host-local plugin:
 *     sequential (median, p99) and 20 in flight (calls/s), duplicates, failures, leftovers;
 *   - the in-process engine (bench/engine.ts): allocations per second and memory for 100,000
 *     allocations, the cost of one allocation at empty, half full and 99% full, agent start
 *     with 100,000 allocations stored.
 * Usage: npm run bench [-- --quick]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engineFigures } from './engine.ts';
import { startAgent } from '../test/helpers/agent.ts';
import { CHILD_PATH } from '../test/helpers/processes.ts';
import { PLUGIN_BUNDLE, buildPlugin } from '../scripts/build.ts';

const quick = process.argv.includes('--quick');
const SEQ = quick ? 15 : 60;
const BURST = quick ? 60 : 200;
const IN_FLIGHT = 20;
const HOST_LOCAL = '/usr/lib/cni/host-local';

interface Timed {
  ms: number;
  code: number | null;
  stdout: string;
}

function exec(cmd: string, args: string[], env: NodeJS.ProcessEnv, stdin = ''): Promise<Timed> {
  const start = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: ['pipe', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.stdin.on('error', () => undefined);
    child.stdin.end(stdin);
    child.on('close', (code) => resolve({ ms: Number(process.hrtime.bigint() - start) / 1e6, code, stdout: out }));
  });
}

const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
};

async function sequential(n: number, call: (i: number) => Promise<Timed>): Promise<{ median: number; p99: number; failures: number; results: Timed[] }> {
  const results: Timed[] = [];
  for (let i = 0; i < n; i++) results.push(await call(i));
  const ms = results.map((r) => r.ms);
  return { median: quantile(ms, 0.5), p99: quantile(ms, 0.99), failures: results.filter((r) => r.code !== 0).length, results };
}

async function concurrent(n: number, width: number, call: (i: number) => Promise<Timed>): Promise<{ perSecond: number; totalMs: number; failures: number; results: Timed[] }> {
  const results: Timed[] = new Array(n);
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        results[i] = await call(i);
      }
    }),
  );
  const totalMs = performance.now() - start;
  return { perSecond: (n / totalMs) * 1000, totalMs, failures: results.filter((r) => r.code !== 0).length, results };
}

function addresses(results: Timed[]): string[] {
  return results.flatMap((r) => {
    try {
      return (JSON.parse(r.stdout).ips as Array<{ address: string }>).map((ip) => ip.address);
    } catch {
      return [];
    }
  });
}

const duplicates = (xs: string[]): number => xs.length - new Set(xs).size;

interface PluginUnderTest {
  name: string;
  exe: string;
  config: (dir: string) => object;
  leftovers: (dir: string) => Promise<number>;
  stop: () => Promise<void>;
  dir: string;
}

async function warrenPlugin(binDir: string): Promise<PluginUnderTest> {
  const agent = await startAgent();
  return {
    name: 'warren',
    exe: join(binDir, 'warren'),
    dir: agent.dir,
    config: () => ({ cniVersion: '1.0.0', name: 'bench', ipam: { type: 'warren', socket: agent.socket, range: '10.230.0.0/16' } }),
    leftovers: async () => (await agent.allocations()).length,
    stop: async () => void (await agent.stop()),
  };
}

function hostLocalPlugin(): PluginUnderTest {
  const dir = mkdtempSync(join(tmpdir(), 'bench-hostlocal-'));
  return {
    name: 'host-local',
    exe: HOST_LOCAL,
    dir,
    config: (d) => ({ cniVersion: '1.0.0', name: 'bench', ipam: { type: 'host-local', dataDir: d, ranges: [[{ subnet: '10.230.0.0/16' }]] } }),
    leftovers: async () => {
      const { readdirSync } = await import('node:fs');
      return readdirSync(join(dir, 'bench')).filter((f) => /^[0-9.]+$/.test(f)).length;
    },
    stop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

function cniEnv(command: string, id: string): NodeJS.ProcessEnv {
  return { PATH: CHILD_PATH, CNI_COMMAND: command, CNI_CONTAINERID: id, CNI_NETNS: `/var/run/netns/${id}`, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' };
}

async function pluginFigures(p: PluginUnderTest): Promise<Record<string, string>> {
  const conf = JSON.stringify(p.config(p.dir));
  const seqAdd = await sequential(SEQ, (i) => exec(p.exe, [], cniEnv('ADD', `seq-${i}`), conf));
  const seqDel = await sequential(SEQ, (i) => exec(p.exe, [], cniEnv('DEL', `seq-${i}`), conf));
  const burstAdd = await concurrent(BURST, IN_FLIGHT, (i) => exec(p.exe, [], cniEnv('ADD', `burst-${i}`), conf));
  const burstDel = await concurrent(BURST, IN_FLIGHT, (i) => exec(p.exe, [], cniEnv('DEL', `burst-${i}`), conf));
  const leftovers = await p.leftovers(p.dir);
  return {
    'ADD sequential median ms': seqAdd.median.toFixed(1),
    'ADD sequential p99 ms': seqAdd.p99.toFixed(1),
    'DEL sequential median ms': seqDel.median.toFixed(1),
    [`ADD ${IN_FLIGHT} in flight /s`]: burstAdd.perSecond.toFixed(0),
    [`ADD ${IN_FLIGHT} in flight total ms`]: burstAdd.totalMs.toFixed(0),
    [`DEL ${IN_FLIGHT} in flight /s`]: burstDel.perSecond.toFixed(0),
    'duplicate addresses': String(duplicates([...addresses(seqAdd.results), ...addresses(burstAdd.results)])),
    failures: String(seqAdd.failures + seqDel.failures + burstAdd.failures + burstDel.failures),
    'left after all DELs': String(leftovers),
  };
}

async function main(): Promise<void> {
  buildPlugin();
  const binDir = mkdtempSync(join(tmpdir(), 'bench-bin-'));
  symlinkSync(PLUGIN_BUNDLE, join(binDir, 'warren'));
  const env = { PATH: CHILD_PATH };
  console.log(`Warren benchmarks, ${new Date().toISOString()}, Node ${process.version}, ${quick ? 'quick' : 'full'} run\n`);

  const floorSeq = await sequential(SEQ, () => exec(process.execPath, ['-e', '0'], env));
  const floorPar = await concurrent(BURST, IN_FLIGHT, () => exec(process.execPath, ['-e', '0'], env));
  const version = await sequential(SEQ, () => exec(join(binDir, 'warren'), [], { ...env, CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.0.0"}'));
  console.log('Process floor and cold start');
  console.log(`  node -e 0 sequential median ms    ${floorSeq.median.toFixed(1)}`);
  console.log(`  node -e 0 ${IN_FLIGHT} at a time /s         ${floorPar.perSecond.toFixed(0)}`);
  console.log(`  warren VERSION median ms          ${version.median.toFixed(1)}  (${(version.median / floorSeq.median).toFixed(2)}x node -e 0)\n`);
  console.log(`Peers: host-local is the CNI reference plugin (Go, files + flock, one node only). Measured elsewhere`);
  console.log(`on this kind of machine: whereabouts v0.5.4 on etcd, about 25 ms per sequential ADD and 40-60 ADD/s`);
  console.log(`with 20 in flight, one lock for the whole range (REFERENCE.md); it is not installable here.\n`);

  const plugins = [await warrenPlugin(binDir), hostLocalPlugin()];
  const columns: Array<Record<string, string>> = [];
  for (const p of plugins) {
    columns.push(await pluginFigures(p));
    await p.stop();
  }
  console.log(`Through the plugin executable (${SEQ} sequential, ${BURST} with ${IN_FLIGHT} in flight)`);
  console.log(`  ${''.padEnd(34)} ${plugins.map((p) => p.name.padStart(12)).join(' ')}`);
  for (const key of Object.keys(columns[0] ?? {})) {
    console.log(`  ${key.padEnd(34)} ${columns.map((c) => (c[key] ?? '').padStart(12)).join(' ')}`);
  }
  const warrenSeq = Number(columns[0]?.['ADD sequential median ms']);
  console.log(`  warren ADD median / node -e 0 median: ${(warrenSeq / floorSeq.median).toFixed(2)}x`);
  console.log(`  warren ADD ${IN_FLIGHT} in flight / node -e 0 ${IN_FLIGHT} at a time: ${(Number(columns[0]?.[`ADD ${IN_FLIGHT} in flight /s`]) / floorPar.perSecond).toFixed(2)}x\n`);

  console.log('In process (engine over SQLite, each figure in a fresh process; last column: what a committed allocation survives)');
  for (const [k, v, d] of await engineFigures(quick)) console.log(`  ${k.padEnd(70)} ${v.padStart(10)}  ${d}`);
  rmSync(binDir, { recursive: true, force: true });
}

await main();
