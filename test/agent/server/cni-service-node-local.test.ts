/**
 * Safe by default (issue 26): the CNI service of an agent that keeps addresses on its node alone
 * while the Kubernetes source is on serves only node-local configs (cni/node-local.ts). Over a real
 * in-memory SQLite store and a manual clock; two services on two stores stand for two nodes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.ts';
import { CniService } from '../../../src/agent/server/cni-service.ts';
import { Allocator } from '../../../src/allocator/allocator.ts';
import type { NodeLocalConfig } from '../../../src/cni/node-local.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';

function node(name: string, nodeLocalOnly?: () => NodeLocalConfig | undefined) {
  const clock = new ManualClock(1_000_000);
  const store = new SqliteStore({ path: ':memory:' });
  const allocator = new Allocator({ store, clock, node: name });
  const service = new CniService({
    allocator,
    readiness: async () => undefined,
    clock,
    storeKind: 'sqlite',
    ...(nodeLocalOnly === undefined ? {} : { nodeLocalOnly }),
  });
  return { store, service };
}

/** A whereabouts config moved over unchanged but for its type. */
const whereabouts = (ipam: Record<string, unknown> = {}) => ({
  cniVersion: '1.0.0',
  name: 'macvlan-net',
  ipam: { type: 'warren', range: '192.168.2.224/28', datastore: 'kubernetes', ...ipam },
});
const call = (service: CniService, command: string, config: unknown, containerID = 'c1') =>
  service.handle({ command, containerID, netns: `/var/run/netns/${containerID}`, ifname: 'net1', config });

describe('a per-node store under Kubernetes', () => {
  it('refuses a whereabouts config on a per-node store under Kubernetes, so two nodes cannot hand out one address', async () => {
    const nodes = [node('n1', () => undefined), node('n2', () => undefined)];
    try {
      for (const { service, store } of nodes) {
        const outcome = await call(service, 'ADD', whereabouts());
        assert.equal(outcome.kind, 'error');
        if (outcome.kind !== 'error') return;
        assert.equal(outcome.output.code, 7, 'INVALID_CONFIG: a config the operator must change');
        assert.match(outcome.output.msg, /network macvlan-net is not node-local/);
        assert.match(outcome.output.msg, /--store kubernetes/);
        assert.match(outcome.output.msg, /"node_local": true/);
        assert.deepEqual(await store.list(), [], 'nothing handed out');
      }
    } finally {
      for (const { store } of nodes) await store.close();
    }
  });

  it('still takes DEL and STATUS of a refused config: they hand nothing out', async () => {
    const { service, store } = node('n1', () => undefined);
    try {
      assert.deepEqual(await call(service, 'DEL', whereabouts()), { kind: 'silent' });
      const status = { ...whereabouts(), cniVersion: '1.1.0' };
      assert.deepEqual(await service.handle({ command: 'STATUS', config: status }), { kind: 'silent' });
    } finally {
      await store.close();
    }
  });

  it('serves a config the operator marked node_local', async () => {
    const { service, store } = node('n1', () => undefined);
    try {
      const outcome = await call(service, 'ADD', whereabouts({ node_local: true }));
      assert.equal(outcome.kind, 'result');
      assert.equal((await store.list()).length, 1);
    } finally {
      await store.close();
    }
  });

  it("serves the config derived from the node's own pod CIDR, and not another config under its name", async () => {
    const own = { cniVersion: '1.0.0', name: 'cbr0', ipam: { type: 'warren', range: '10.244.1.0/24' } };
    const probe = node('probe');
    let pools: string[];
    try {
      // The range's pool key as the agent computes it, from a real ADD.
      assert.equal((await call(probe.service, 'ADD', own)).kind, 'result');
      pools = (await probe.store.list()).map((a) => a.pool);
    } finally {
      await probe.store.close();
    }
    const { service, store } = node('n1', () => ({ network: 'cbr0', pools }));
    try {
      assert.equal((await call(service, 'ADD', own)).kind, 'result');
      const elsewhere = { ...own, ipam: { ...own.ipam, range: '10.244.2.0/24' } };
      const refused = await call(service, 'ADD', elsewhere, 'c2');
      assert.equal(refused.kind === 'error' ? refused.output.code : 0, 7);
    } finally {
      await store.close();
    }
  });

  it('serves any config when not told to serve only node-local ones (a cluster store, or no Kubernetes)', async () => {
    const { service, store } = node('n1');
    try {
      assert.equal((await call(service, 'ADD', whereabouts())).kind, 'result');
    } finally {
      await store.close();
    }
  });
});
