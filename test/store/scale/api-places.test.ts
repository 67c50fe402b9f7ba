/**
 * The scale harness's API server out of its process (bench/scale/api-server.ts), held to the
 * in-process path it replaces at scale: 10 simulated nodes, 100 s idle and 20 s of seeded churn at
 * 10 ADDs+DELs a second, run three ways —
 * - the fake in this process, counted by the fake (the idle-budget test's path);
 * - the fake in a child process (`--api child`), counted by the fake over IPC;
 * - the fake in a child process reached through a kubeconfig file written for it, as any API
 *   server (`--kubeconfig`), counted by the nodes' own request counters —
 * and each window's requests by verb and resource must be the same. The counts are exact (one
 * ManualClock, a settle after every step), so a difference is a path that lost or added requests.
 * The auditor finds no address held twice on each path, and the child is gone once stopped.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ApiChoice, ChildProcessApi } from '../../../bench/scale/api-server.ts';
import { ScaleCluster } from '../../../bench/scale/cluster.ts';
import { churn, holdBlocks, idleWindow } from '../../../bench/scale/scenarios.ts';
import type { WindowCounts } from '../../../bench/scale/window-counts.ts';

const NODES = 10;

interface PathCounts {
  readonly idle: Record<string, number>;
  readonly churn: Record<string, number>;
  readonly duplicates: readonly string[];
}

/** A window's requests by verb and resource (subresources as their object: the counters name them so). */
function byKind(c: WindowCounts): Record<string, number> {
  const kinds: Record<string, number> = {};
  for (const [kind, n] of c.byKind) {
    const key = kind.replace(/\/status$/, '');
    kinds[key] = (kinds[key] ?? 0) + n;
  }
  return Object.fromEntries(Object.entries(kinds).sort(([a], [b]) => (a < b ? -1 : 1)));
}

async function run(api: ApiChoice): Promise<PathCounts> {
  // Publications settle for 10 minutes by default: a 20-s churn would write nothing worth comparing.
  const flags = { publishSettleSeconds: '1' };
  const cluster = await ScaleCluster.start({
    nodes: NODES,
    range: '10.0.0.0/16',
    blockSize: 28,
    api,
    memory: true,
    flags,
  });
  try {
    await holdBlocks(cluster, 2);
    await cluster.advance(30_000, 1000);
    const idle = await idleWindow(cluster, 100);
    const churned = await churn(cluster, { rate: 10, seconds: 20 });
    assert.equal(churned.failed, 0, churned.failures.join('\n'));
    assert.equal(cluster.unsettled, 0, 'every request of the windows was answered');
    return { idle: byKind(idle), churn: byKind(churned.counts), duplicates: churned.duplicates };
  } finally {
    await cluster.stop();
  }
}

describe(`${NODES} simulated nodes against the fake in a child process (the scale harness's --api child and --kubeconfig)`, () => {
  it('counts the same requests as the in-process fake, from the fake over IPC and from the nodes through a kubeconfig', async (t) => {
    const inProcess = await run({ place: 'in-process' });
    const child = await run({ place: 'child' });
    const server = await ChildProcessApi.start(Date.now());
    let viaKubeconfig: PathCounts;
    try {
      viaKubeconfig = await run({ place: 'kubeconfig', path: server.adminKubeconfig });
    } finally {
      await server.stop();
    }
    t.diagnostic(JSON.stringify({ inProcess, child, viaKubeconfig }));
    assert.ok(Object.keys(inProcess.churn).length > 0, 'the churn made requests');
    assert.deepEqual(child.idle, inProcess.idle, 'idle, child process');
    assert.deepEqual(child.churn, inProcess.churn, 'churn, child process');
    assert.deepEqual(viaKubeconfig.idle, inProcess.idle, 'idle, kubeconfig (the nodes counting)');
    assert.deepEqual(viaKubeconfig.churn, inProcess.churn, 'churn, kubeconfig (the nodes counting)');
    for (const counts of [inProcess, child, viaKubeconfig]) assert.deepEqual(counts.duplicates, []);
  });

  it('stops the child by its PID: no process is left', async () => {
    const server = await ChildProcessApi.start(Date.now());
    const pid = server.pid;
    assert.ok(pid !== undefined);
    await server.stop();
    assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' });
  });
});
