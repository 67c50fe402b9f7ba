/**
 * The audit and the namespace sweep against real network namespaces: each seeded allocation gets
 * the right verdict, --fix releases only what is provably stale, and a netns directory the agent
 * cannot observe never reads as "everything is gone".
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import type { AuditReport } from '../../src/api/protocol.ts';
import type { AgentStatus } from '../../src/api/status.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { createNetns, deleteNetns, uniqueName } from '../helpers/netns.ts';
import { WARREN_BIN, isRoot, run, tempDir, waitFor } from '../helpers/processes.ts';
import { seedAllocations } from '../helpers/seed.ts';

const skip = isRoot() ? false : 'needs root for network namespaces';

describe('audit', { skip }, () => {
  const agents: AgentHandle[] = [];
  const namespaces: string[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
    for (const ns of namespaces) await deleteNetns(ns);
  });

  const verdicts = (report: AuditReport) =>
    Object.fromEntries(
      report.findings.map((f) => [
        f.allocation.containerID,
        f.verdict.kind === 'suspect'
          ? `suspect:${f.verdict.why}`
          : f.verdict.kind === 'stale'
            ? `stale:${f.verdict.proof}`
            : 'healthy',
      ]),
    );

  it('names healthy, stale and orphaned allocations, and --fix releases only the stale', async () => {
    const live = await createNetns();
    namespaces.push(live.name);
    const dir = tempDir('warren-agent-');
    await seedAllocations(dir, 'anet', '10.222.0.0/24', [
      { containerID: 'healthy', address: '10.222.0.10', netns: live.path, podName: 'web', podUID: 'u1' },
      {
        containerID: 'stale',
        address: '10.222.0.11',
        netns: `/var/run/netns/${uniqueName('wrn-gone-', 24)}`,
        podName: 'old',
        podUID: 'u2',
      },
      { containerID: 'orphan', address: '10.222.0.12' },
      { containerID: 'procns', address: '10.222.0.13', netns: '/proc/999999/ns/net', podUID: 'u3' },
    ]);
    // The sweep off: what is stale stays for the audit to report and --fix to release.
    const agent = await startAgent({ dir, args: ['--netns-dirs', '/var/run/netns', '--netns-sweep', 'off'] });
    agents.push(agent);
    const audit = await run(process.execPath, [WARREN_BIN, 'audit', '--json', '--socket', agent.socket]);
    assert.equal(audit.code, 3, 'something stale and suspect is there: a script sees it in the exit code');
    const report = JSON.parse(audit.stdout) as AuditReport;
    assert.deepEqual(verdicts(report), {
      healthy: 'healthy',
      stale: 'stale:netns-gone',
      orphan: 'suspect:orphaned',
      procns: 'suspect:unobservable',
    });
    assert.deepEqual(report.counts, { healthy: 1, stale: 1, suspect: 2 });
    assert.deepEqual(
      report.sources.netns.map((d) => d.observable),
      [true],
    );
    const human = await run(process.execPath, [WARREN_BIN, 'audit', '--socket', agent.socket]);
    assert.match(human.stdout, /1 healthy, 1 stale, 2 suspect/);
    assert.match(human.stdout, /stale\s+10\.222\.0\.11.*is gone/);
    assert.match(human.stdout, /suspect \(orphaned\)\s+10\.222\.0\.12.*nothing can vouch/);

    const fix = await run(process.execPath, [WARREN_BIN, 'audit', '--fix', '--json', '--socket', agent.socket]);
    assert.equal(fix.code, 3, `the suspect ones are left after --fix: ${fix.stderr}`);
    assert.deepEqual(
      (JSON.parse(fix.stdout) as AuditReport).released?.map((a) => a.containerID),
      ['stale'],
    );
    assert.deepEqual((await agent.allocations()).map((a) => a.containerID).sort(), ['healthy', 'orphan', 'procns']);
  });

  it('refuses to release an address a live namespace still uses without --force, and an address nothing holds', async () => {
    const live = await createNetns();
    namespaces.push(live.name);
    const dir = tempDir('warren-agent-');
    await seedAllocations(dir, 'gnet', '10.225.0.0/24', [
      { containerID: 'running', address: '10.225.0.10', netns: live.path, podName: 'web', podUID: 'g1' },
      { containerID: 'also-running', address: '10.225.0.11', netns: live.path, podName: 'db', podUID: 'g2' },
    ]);
    const agent = await startAgent({
      dir,
      args: ['--netns-dirs', '/var/run/netns', '--netns-grace', '0', '--reconcile-interval', '3600'],
    });
    agents.push(agent);
    const warren = (...args: string[]) => run(process.execPath, [WARREN_BIN, ...args, '--socket', agent.socket]);
    const clean = await warren('audit');
    assert.equal(clean.code, 0, `every allocation is healthy: ${clean.stdout}${clean.stderr}`);

    for (const args of [
      ['release', '--address', '10.225.0.10'],
      ['release', '--container', 'also-running'],
    ]) {
      const refused = await warren(...args);
      assert.equal(refused.code, 1, args.join(' '));
      assert.match(refused.stderr, /IN_USE: .*still in use: the network namespace exists/);
      assert.match(refused.stderr, new RegExp(`network namespace ${live.path}`));
      assert.match(refused.stderr, /--force/);
    }
    assert.equal((await agent.allocations()).length, 2, 'a refused release released nothing');

    const forced = await warren('release', '--address', '10.225.0.10', '--force');
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stdout, /released 10\.225\.0\.10/);
    const unknown = await warren('release', '--address', '10.225.0.10');
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /NOT_FOUND: release: no allocation holds 10\.225\.0\.10/);
    assert.deepEqual(
      (await agent.allocations()).map((a) => a.containerID),
      ['also-running'],
    );
  });

  it('lets the reconcile loop release an allocation whose namespace is gone, and keep the live one', async () => {
    const live = await createNetns();
    const doomed = await createNetns();
    namespaces.push(live.name, doomed.name);
    const dir = tempDir('warren-agent-');
    await seedAllocations(dir, 'snet', '10.223.0.0/24', [
      { containerID: 'lives', address: '10.223.0.10', netns: live.path },
      { containerID: 'dies', address: '10.223.0.11', netns: doomed.path },
    ]);
    const agent = await startAgent({
      dir,
      args: ['--netns-dirs', '/var/run/netns', '--netns-grace', '0', '--reconcile-interval', '0.1'],
    });
    agents.push(agent);
    const status = async () =>
      (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/status' })).body as AgentStatus;
    // Wait for at least one full tick with both namespaces present: nothing is released.
    const firstTick = (await waitFor('a reconcile tick', async () => (await status()).reconciler.lastReconcile)).at;
    await waitFor('a second tick', async () =>
      (await status()).reconciler.lastReconcile?.at !== firstTick ? true : undefined,
    );
    assert.equal((await agent.allocations()).length, 2);
    await deleteNetns(doomed.name);
    await waitFor('the sweep to release the gone namespace', async () =>
      (await agent.allocations('?containerID=dies')).length === 0 ? true : undefined,
    );
    assert.deepEqual(
      (await agent.allocations()).map((a) => a.containerID),
      ['lives'],
    );
  });

  it('with the defaults, releases what a namespace gone held as the agent starts and as soon as one is removed, not a pass later', async () => {
    const live = await createNetns();
    const doomed = await createNetns();
    namespaces.push(live.name, doomed.name);
    const dir = tempDir('warren-agent-');
    await seedAllocations(dir, 'rnet', '10.226.0.0/24', [
      { containerID: 'lives', address: '10.226.0.10', netns: live.path },
      { containerID: 'dies', address: '10.226.0.11', netns: doomed.path },
      // Its namespace went while no agent ran (or a restored disk brought the record back).
      { containerID: 'went', address: '10.226.0.12', netns: `/var/run/netns/${uniqueName('wrn-went-', 24)}` },
    ]);
    // No runtime source, the default grace, and an hour between passes: only the pass at start and
    // the directory's watch can release anything within the test.
    const agent = await startAgent({ dir, args: ['--netns-dirs', '/var/run/netns', '--reconcile-interval', '3600'] });
    agents.push(agent);
    await waitFor('the pass at start to release the record whose namespace went', async () =>
      (await agent.allocations('?containerID=went')).length === 0 ? true : undefined,
    );
    assert.deepEqual((await agent.allocations()).map((a) => a.containerID).sort(), ['dies', 'lives']);
    await deleteNetns(doomed.name);
    await waitFor('the removal to release what its namespace held', async () =>
      (await agent.allocations('?containerID=dies')).length === 0 ? true : undefined,
    );
    assert.deepEqual(
      (await agent.allocations()).map((a) => a.containerID),
      ['lives'],
    );
  });

  it('releases nothing and says why when the netns directory cannot be observed', async () => {
    // A plain directory standing in for an unmounted /var/run/netns: its emptiness proves nothing.
    const unmounted = join(tempDir('warren-netns-'), 'netns');
    mkdirSync(unmounted);
    const dir = tempDir('warren-agent-');
    await seedAllocations(dir, 'unet', '10.224.0.0/24', [
      { containerID: 'u-1', address: '10.224.0.10', netns: join(unmounted, 'cni-1'), podUID: 'a' },
      { containerID: 'u-2', address: '10.224.0.11', netns: join(unmounted, 'cni-2'), podUID: 'b' },
    ]);
    const agent = await startAgent({
      dir,
      args: ['--netns-dirs', unmounted, '--netns-grace', '0', '--reconcile-interval', '0.1'],
    });
    agents.push(agent);
    const status = async () =>
      (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/status' })).body as AgentStatus;
    const first = await waitFor('a reconcile tick', async () => (await status()).reconciler.lastReconcile);
    await waitFor('another tick', async () =>
      (await status()).reconciler.lastReconcile?.at !== first.at ? true : undefined,
    );
    const last = (await status()).reconciler.lastReconcile;
    assert.equal(last?.netnsReleased, 0);
    assert.match(last?.unobservable.join(' ') ?? '', /is not a mount point/);
    const report = (await requestJson({ socket: agent.socket, method: 'POST', path: '/v1/audit', body: { fix: true } }))
      .body as AuditReport;
    assert.deepEqual(report.released, []);
    assert.deepEqual(
      report.sources.netns.map((d) => [d.observable, /not a mount point/.test(d.reason ?? '')]),
      [[false, true]],
    );
    for (const f of report.findings) assert.equal(f.verdict.kind, 'suspect');
    assert.equal((await agent.allocations()).length, 2);
    const text = await run(process.execPath, [WARREN_BIN, 'status', '--socket', agent.socket]);
    assert.match(text.stdout, /could not observe: .*is not a mount point/);
  });
});
