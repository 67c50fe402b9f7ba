/**
 * The config the agent derives from the node's primary is node-local by construction only when it
 * took over host-local (the node's own pod CIDR): the config manager names it, with the range pools
 * the agent's own ADD parser gives its output, so a per-node store under Kubernetes serves exactly
 * it (cni/node-local.ts). A whereabouts primary is shared by the nodes and is not.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CniConfigManager } from '../../../src/agent/node/cni-config-manager.ts';
import { parseNetConf } from '../../../src/cni/netconf.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { silentLogger } from '../../helpers/logger.ts';
import { HANG_BOUND_MS, removeDir, tempDir } from '../../helpers/processes.ts';

async function derivedFrom(ipam: Record<string, unknown>) {
  const dir = tempDir('warren-nodelocal-');
  const primary = { cniVersion: '1.0.0', name: 'podnet', plugins: [{ type: 'bridge', bridge: 'cni0', ipam }] };
  writeFileSync(join(dir, '10-bridge.conflist'), JSON.stringify(primary));
  const manager = new CniConfigManager({
    confDir: dir,
    primaryWaitMs: 60_000,
    cniVersionMax: '1.0.0',
    cleanupOnExit: false,
    clock: new ManualClock(0),
    logger: silentLogger,
  });
  const abort = new AbortController();
  try {
    assert.equal(manager.nodeLocal(), undefined, 'nothing before a config was derived');
    manager.start(abort.signal);
    await manager.whenPassed((s) => s.state === 'current', AbortSignal.timeout(HANG_BOUND_MS));
    const out = JSON.parse(readFileSync(join(dir, '00-warren.conflist'), 'utf8'));
    const served = parseNetConf({ ...out.plugins[0], name: out.name, cniVersion: out.cniVersion }, 'ADD');
    return { nodeLocal: manager.nodeLocal(), pools: served.ipam.ranges.map((r) => r.pool) };
  } finally {
    abort.abort();
    await manager.stopped();
    removeDir(dir);
  }
}

describe("the config derived from the node's primary", () => {
  it("is node-local when it took over host-local, with exactly the ranges the runtime's ADD will carry", async () => {
    const { nodeLocal, pools } = await derivedFrom({ type: 'host-local', subnet: '10.244.3.0/24' });
    assert.deepEqual(nodeLocal, { network: 'podnet', pools });
  });

  it('is not node-local when it took over whereabouts, whose ranges the nodes share', async () => {
    const { nodeLocal } = await derivedFrom({ type: 'whereabouts', range: '10.9.0.0/24', datastore: 'kubernetes' });
    assert.equal(nodeLocal, undefined);
  });
});
