/**
 * A WarrenPool object read into what an ADD plans with: its ranges through the config's own range
 * parser (whereabouts' keys, their leniency and their refusals), pool keys derived from the pool and
 * not from any network, its selectors as the API server means them, and its capacity.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WarrenError } from '../../../src/core/errors.ts';
import { parseIpamConfig } from '../../../src/cni/ipam-config.ts';
import { formatSelector, parseLabelSelector, selectorMatches } from '../../../src/sources/kubernetes/label-selector.ts';
import { parseWarrenPool, poolCapacity, poolNetworkName } from '../../../src/sources/kubernetes/warren-pool.ts';

const pool = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: 'warren.dev/v1alpha1',
  kind: 'WarrenPool',
  metadata: { name, uid: `uid-${name}`, generation: 1 },
  spec,
});

describe('parseWarrenPool', () => {
  it("reads the ranges with whereabouts' keys as a config's ipRanges entry, keyed by the pool", () => {
    const spec = parseWarrenPool(
      pool('gold', {
        ranges: [
          {
            range: '10.50.0.7/24',
            range_start: '10.50.0.10',
            range_end: '10.50.0.200',
            exclude: ['10.50.0.64/28'],
            gateway: '10.50.0.1',
            block_size: 28,
          },
          { range: 'fd50::/120' },
        ],
        routes: [{ dst: '0.0.0.0/0', gw: '10.50.0.1' }],
        blockSize: 124,
        sticky: true,
      }),
    );
    const config = parseIpamConfig({
      type: 'warren',
      network_name: 'gold',
      ipRanges: [
        {
          range: '10.50.0.7/24',
          range_start: '10.50.0.10',
          range_end: '10.50.0.200',
          exclude: ['10.50.0.64/28'],
          gateway: '10.50.0.1',
          block_size: 28,
        },
        { range: 'fd50::/120' },
      ],
    }).ranges;
    // The same parser: a config's reading of the same keys, but for the pool key.
    const { pool: _fromPool, ...read } = spec.ranges[0] ?? { pool: '' };
    const { pool: _fromConfig, ...expected } = config[0] ?? { pool: '' };
    assert.deepEqual(read, expected);
    assert.equal(poolNetworkName('gold'), 'warrenpool:gold');
    assert.equal(spec.ranges[0]?.pool, '10.50.0.0/24@warrenpool:gold');
    assert.equal(spec.ranges[1]?.pool, 'fd50::/120@warrenpool:gold');
    assert.equal(spec.ranges[0]?.blockPrefix, 28, "the range's own block_size");
    assert.equal(spec.ranges[1]?.blockPrefix, 124, "the pool's blockSize where the range has none");
    assert.deepEqual(spec.routes, [{ dst: '0.0.0.0/0', gw: '10.50.0.1' }]);
    assert.equal(spec.sticky, true);
    assert.equal(spec.nodeSelector, undefined);
  });

  it('refuses a spec that does not parse, naming the pool and the key', () => {
    const refused = (spec: Record<string, unknown>, message: RegExp) =>
      assert.throws(
        () => parseWarrenPool(pool('bad', spec)),
        (e: unknown) => e instanceof WarrenError && e.code === 'INVALID_CONFIG' && message.test(e.message),
      );
    refused({}, /^WarrenPool bad: spec.ranges must list at least one range/);
    refused({ ranges: [{ range: '10.0.0.0/33' }] }, /^WarrenPool bad: spec.ranges\[0\].range/);
    refused({ ranges: [{ range: '10.0.0.0/24', exclude: 'x' }] }, /^WarrenPool bad: spec.ranges\[0\].exclude/);
    refused(
      { ranges: [{ range: '10.0.0.0/24' }, { range: '10.0.0.128/25' }] },
      /^WarrenPool bad: spec.ranges\[1\].range/,
    );
    refused({ ranges: [{ range: '10.0.0.0/24', ipRanges: [] }] }, /unknown keys ipRanges/);
    refused(
      { ranges: [{ range: '10.0.0.0/24' }], nodeSelector: { matchExpressions: [{ key: 'a', operator: 'Is' }] } },
      /^WarrenPool bad: spec.nodeSelector.matchExpressions\[0\].operator/,
    );
  });

  it('counts its capacity once per address, exclusions and gateways out', () => {
    const spec = parseWarrenPool(
      pool('c', {
        ranges: [
          // 254 hosts, less .64-.79 (16) and .70-.90 overlapping it (11 more), less the gateway .1.
          { range: '10.60.0.0/24', exclude: ['10.60.0.64/28', '10.60.0.70/31', '10.60.0.80/29'], gateway: '10.60.0.1' },
          { range: 'fd60::/64' },
        ],
      }),
    );
    assert.equal(poolCapacity(spec.ranges.slice(0, 1)), 254n - 16n - 8n - 1n);
    // IPv6: the network address out, the all-ones address in (as a config's range).
    assert.equal(poolCapacity(spec.ranges.slice(1)), (1n << 64n) - 1n);
  });
});

describe('a network config naming pools', () => {
  it('takes "pools" instead of inline ranges, and refuses both, a bad name, or the pools\' network_name', () => {
    const config = parseIpamConfig({ type: 'warren', pools: ['gold', 'silver'] });
    assert.deepEqual(config.pools, ['gold', 'silver']);
    assert.deepEqual(config.ranges, []);
    assert.deepEqual(parseIpamConfig({ type: 'warren', pools: [] }).pools, []);
    assert.throws(
      () => parseIpamConfig({ type: 'warren', range: '10.0.0.0/24', pools: ['a'] }),
      /ipam.pools: .*one or the other/,
    );
    assert.throws(
      () => parseIpamConfig({ type: 'warren', pools: ['Gold'] }),
      /ipam.pools\[0\]: "Gold" is not a WarrenPool name/,
    );
    assert.throws(() => parseIpamConfig({ type: 'warren', pools: ['a', 'a'] }), /listed twice/);
    assert.throws(
      () => parseIpamConfig({ type: 'warren', range: '10.0.0.0/24', network_name: 'warrenpool:gold' }),
      /ipam.network_name: .*WarrenPools' own/,
    );
    assert.throws(() => parseIpamConfig({ type: 'warren' }), /needs "range", a non-empty "ipRanges", or "pools"/);
  });
});

describe('label selectors', () => {
  it('match as the API server does: every requirement, absent labels pass NotIn and DoesNotExist', () => {
    const selector = parseLabelSelector(
      {
        matchLabels: { zone: 'a' },
        matchExpressions: [
          { key: 'tier', operator: 'In', values: ['web', 'db'] },
          { key: 'legacy', operator: 'NotIn', values: ['yes'] },
          { key: 'gpu', operator: 'DoesNotExist' },
          { key: 'rack', operator: 'Exists' },
        ],
      },
      'sel',
    );
    assert.ok(typeof selector !== 'string');
    assert.equal(selectorMatches(selector, { zone: 'a', tier: 'db', rack: '1' }), true);
    assert.equal(selectorMatches(selector, { zone: 'b', tier: 'db', rack: '1' }), false);
    assert.equal(selectorMatches(selector, { zone: 'a', tier: 'db', rack: '1', legacy: 'yes' }), false);
    assert.equal(selectorMatches(selector, { zone: 'a', tier: 'db', rack: '1', gpu: '' }), false);
    assert.equal(selectorMatches(selector, { zone: 'a', tier: 'db' }), false);
    assert.equal(formatSelector(selector), 'zone=a,tier in (web,db),legacy notin (yes),!gpu,rack');
    const empty = parseLabelSelector({}, 'sel');
    assert.ok(typeof empty !== 'string');
    assert.equal(selectorMatches(empty, {}), true);
    assert.match(
      String(parseLabelSelector({ matchExpressions: [{ key: 'a', operator: 'In' }] }, 'sel')),
      /must not be empty/,
    );
    assert.match(
      String(parseLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] }, 'sel')),
      /must be empty/,
    );
  });
});
