/**
 * The scale harness's nodes in node groups (`--node-processes K`, bench/scale/node-groups.ts), held
 * to the one-process path they stand in for: 10 simulated nodes, 100 s idle and 20 s of seeded churn
 * at 10 ADDs+DELs a second, once with the nodes in this process and once dealt to 2 child
 * processes, each on a clock of its own stepped in lockstep with the harness's. Each window's
 * requests by verb and resource, node by node, must be the same (the counts are the fake's, exact:
 * one clock, a settle after every step), and the auditor, reading every node's file through its
 * group and the cluster's objects, finds no address held twice.
 *
 * A group that dies fails the run at the next step with the group and its exit named, never a
 * hang; and once stopped, no group's process is left.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { ScaleCluster, type ScaleClusterOptions } from '../../../bench/scale/cluster.ts';
import type { ScaleNode } from '../../../bench/scale/node-host.ts';
import { churn, holdBlocks, idleWindow } from '../../../bench/scale/scenarios.ts';
import type { WindowCounts } from '../../../bench/scale/window-counts.ts';

const NODES = 10;
// Publications settle for 10 minutes by default: a 20-s churn would write nothing worth comparing.
const OPTIONS: ScaleClusterOptions = {
  nodes: NODES,
  range: '10.0.0.0/16',
  blockSize: 28,
  memory: true,
  flags: { publishSettleSeconds: '1' },
};

/** Each node's requests of a window, by verb and resource. */
function perNode(c: WindowCounts): Record<string, Record<string, number>> {
  return Object.fromEntries(
    [...c.perNode].map(([node, kinds]) => [node, Object.fromEntries([...kinds].sort(([a], [b]) => (a < b ? -1 : 1)))]),
  );
}

interface Run {
  readonly idle: Record<string, Record<string, number>>;
  readonly churn: Record<string, Record<string, number>>;
  readonly adds: number;
  readonly held: number;
  readonly duplicates: readonly string[];
}

async function run(cluster: ScaleCluster<ScaleNode>): Promise<Run> {
  try {
    await holdBlocks(cluster, 2);
    await cluster.advance(30_000, 1000);
    const idle = await idleWindow(cluster, 100);
    const churned = await churn(cluster, { rate: 10, seconds: 20 });
    assert.equal(churned.failed, 0, churned.failures.join('\n'));
    assert.equal(cluster.unsettled, 0, 'every request of the windows was answered');
    return {
      idle: perNode(idle),
      churn: perNode(churned.counts),
      adds: churned.adds,
      held: churned.held,
      duplicates: churned.duplicates,
    };
  } finally {
    await cluster.stop();
  }
}

/** Whether process `pid` is gone. */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

describe(`${NODES} simulated nodes in 2 node groups (the scale harness's --node-processes)`, () => {
  it('counts the same requests, node by node, as the nodes in one process; no address held twice', async (t) => {
    const one = await run(await ScaleCluster.start(OPTIONS));
    const grouped = await ScaleCluster.startGrouped(OPTIONS, 2);
    const pids = grouped.host.processes.map((p) => p.pid);
    assert.deepEqual(
      grouped.host.processes.map((p) => p.nodes),
      [NODES / 2, NODES / 2],
      'the nodes are dealt evenly',
    );
    const two = await run(grouped);
    t.diagnostic(JSON.stringify({ one: one.churn['node-0000'], two: two.churn['node-0000'] }));
    assert.ok(
      Object.values(one.churn).some((kinds) => Object.keys(kinds).length > 0),
      'the churn made requests',
    );
    assert.deepEqual(two.idle, one.idle, 'idle, node by node');
    assert.deepEqual(two.churn, one.churn, 'churn, node by node');
    assert.equal(two.adds, one.adds);
    assert.equal(two.held, one.held, "the auditor reads every group's files");
    assert.deepEqual(one.duplicates, []);
    assert.deepEqual(two.duplicates, []);
    assert.deepEqual(
      pids.filter((pid) => !gone(pid)),
      [],
      'every group stopped by its PID',
    );
  });

  it('fails the run when a group dies, naming it, and leaves no process once stopped', async () => {
    const cluster = await ScaleCluster.startGrouped({ ...OPTIONS, nodes: 4 }, 2);
    const [first, second] = cluster.host.processes.map((p) => p.pid);
    assert.ok(first !== undefined && second !== undefined);
    try {
      process.kill(first, 'SIGKILL');
      while (!gone(first)) await delay(10);
      await assert.rejects(cluster.advance(5_000, 1000), /node group 0 \(PID \d+\) exited \(SIGKILL\)/);
    } finally {
      await cluster.stop();
    }
    assert.ok(gone(first) && gone(second), 'both groups gone');
  });
});
