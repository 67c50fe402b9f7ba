/**
 * Which configs a per-node store may serve under Kubernetes (cni/node-local.ts), and the IPAM keys
 * that say so: `node_local` (Warren's), whereabouts' store keys, and `store: "kubernetes"`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { isNodeLocal, perNodeRefusal, whereaboutsStoreKeys } from '../../src/cni/node-local.ts';

const base = { type: 'warren', range: '10.1.0.0/24' };
const served = (ipam: Record<string, unknown>, name = 'net') => ({ name, ipam: parseIpamConfig({ ...base, ...ipam }) });

describe('node-local configs', () => {
  it('reads "node_local": true as the mark, false as none, anything else as a refusal naming the key', () => {
    assert.equal(parseIpamConfig({ ...base, node_local: true }).nodeLocal, true);
    assert.equal('nodeLocal' in parseIpamConfig({ ...base, node_local: false }), false);
    assert.equal('nodeLocal' in parseIpamConfig(base), false);
    assert.throws(() => parseIpamConfig({ ...base, node_local: 'yes' }), /ipam\.node_local: must be a boolean/);
  });

  it('accepts "store": "kubernetes" as the store a network expects', () => {
    assert.equal(parseIpamConfig({ ...base, store: 'kubernetes' }).store, 'kubernetes');
    assert.throws(() => parseIpamConfig({ ...base, store: 'redis' }), /"kubernetes", "sqlite" or "etcd"/);
  });

  it("picks whereabouts' store keys out of the ignored ones, wherever the config sits", () => {
    const ipam = parseIpamConfig(
      { ...base, datastore: 'kubernetes', etcd_host: 'e:2379', kubernetes: {}, log_level: 'debug' },
      'plugins[1].ipam',
    );
    assert.deepEqual(
      whereaboutsStoreKeys(ipam.ignoredKeys).map((k) => k.path),
      ['plugins[1].ipam.datastore', 'plugins[1].ipam.etcd_host', 'plugins[1].ipam.kubernetes'],
    );
  });

  it('takes a config as node-local when marked, or when it is exactly the derived one (its network, its ranges)', () => {
    const pool = served({}).ipam.ranges[0]?.pool ?? '';
    assert.ok(isNodeLocal(served({ node_local: true }), undefined));
    assert.ok(!isNodeLocal(served({}), undefined));
    assert.ok(isNodeLocal(served({}), { network: 'net', pools: [pool] }));
    assert.ok(!isNodeLocal(served({}, 'other'), { network: 'net', pools: [pool] }), 'another network');
    assert.ok(!isNodeLocal(served({ range: '10.2.0.0/24' }), { network: 'net', pools: [pool] }), 'another range');
  });

  it('refuses with both fixes named, and says nothing of a node-local config', () => {
    assert.match(perNodeRefusal(served({}), undefined) ?? '', /--store kubernetes.*"node_local": true/s);
    assert.equal(perNodeRefusal(served({ node_local: true }), undefined), undefined);
  });
});
