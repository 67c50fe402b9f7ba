/**
 * parseIpamConfig: every key whereabouts users write is accepted (honoured, or reported as
 * ignored), every problem is an INVALID_CONFIG error whose message starts with the path of the
 * offending key, no two ranges of one config share an address, and no input at all makes it throw
 * anything else. capacityOf counts each unusable address once. Pool keys round-trip.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { WarrenError } from '../../src/core/errors.ts';
import { formatIP, parseIP } from '../../src/ipam/address.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { type RangeSpec, capacityOf, inSubnet } from '../../src/ipam/range.ts';
import { networkNameProblem, parsePoolKey, poolKeyOf, poolsOverlap, subnetsOverlap } from '../../src/ipam/pool-key.ts';

function ip(text: string): bigint {
  const parsed = parseIP(text);
  assert.ok(parsed !== undefined, `${text} should parse`);
  return parsed.value;
}

function only(config: ReturnType<typeof parseIpamConfig>): RangeSpec {
  assert.equal(config.ranges.length, 1);
  return config.ranges[0] as RangeSpec;
}

/** Asserts that parsing throws INVALID_CONFIG and that the message starts with `path: `. */
function rejects(value: unknown, path: string, detail?: RegExp): void {
  assert.throws(
    () => parseIpamConfig(value),
    (error: unknown) => {
      assert.ok(error instanceof WarrenError, `expected a WarrenError, got ${String(error)}`);
      assert.equal(error.code, 'INVALID_CONFIG');
      assert.ok(error.message.startsWith(`${path}: `), `message "${error.message}" should start with "${path}: "`);
      if (detail !== undefined) assert.match(error.message, detail);
      return true;
    },
  );
}

const base = { type: 'warren', range: '10.0.0.0/24' };

describe('parseIpamConfig accepts', () => {
  test('a bare range, with network and broadcast left out', () => {
    const config = parseIpamConfig(base);
    assert.equal(config.type, 'warren');
    assert.equal(config.networkName, '');
    assert.equal(config.cooldownSeconds, 0);
    assert.deepEqual(config.routes, []);
    assert.equal(config.dns, undefined);
    assert.equal(config.socket, undefined);
    const range = only(config);
    assert.equal(range.family, 4);
    assert.equal(range.subnet, '10.0.0.0/24');
    assert.equal(range.prefixLength, 24);
    assert.equal(range.network, ip('10.0.0.0'));
    assert.equal(range.first, ip('10.0.0.1'));
    assert.equal(range.last, ip('10.0.0.254'));
    assert.deepEqual(range.excluded, []);
    assert.equal(range.gateway, undefined);
    assert.equal(range.pool, '10.0.0.0/24');
  });

  test('range_start and range_end narrowing the span', () => {
    const range = only(parseIpamConfig({ ...base, range_start: '10.0.0.10', range_end: '10.0.0.20' }));
    assert.equal(range.first, ip('10.0.0.10'));
    assert.equal(range.last, ip('10.0.0.20'));
  });

  test('range_start at the network address and range_end at broadcast, clamped to the hosts', () => {
    const range = only(parseIpamConfig({ ...base, range_start: '10.0.0.0', range_end: '10.0.0.255' }));
    assert.equal(range.first, ip('10.0.0.1'));
    assert.equal(range.last, ip('10.0.0.254'));
  });

  test('exclude as CIDRs and as bare addresses', () => {
    const range = only(parseIpamConfig({ ...base, exclude: ['10.0.0.0/28', '10.0.0.200'] }));
    assert.deepEqual(range.excluded, [
      [ip('10.0.0.0'), ip('10.0.0.15')],
      [ip('10.0.0.200'), ip('10.0.0.200')],
    ]);
  });

  test('a gateway, which is then excluded from the range', () => {
    const range = only(parseIpamConfig({ ...base, gateway: '10.0.0.1' }));
    assert.equal(range.gateway?.value, ip('10.0.0.1'));
    assert.deepEqual(range.excluded, [[ip('10.0.0.1'), ip('10.0.0.1')]]);
  });

  test('routes, canonicalised, with and without a gateway', () => {
    const config = parseIpamConfig({
      ...base,
      routes: [
        { dst: '0.0.0.0/0', gw: '10.0.0.1' },
        { dst: '192.168.0.0/16' },
        { dst: 'FD00:0::/8', gw: 'fd00::0001' },
      ],
    });
    assert.deepEqual(config.routes, [
      { dst: '0.0.0.0/0', gw: '10.0.0.1' },
      { dst: '192.168.0.0/16' },
      { dst: 'fd00::/8', gw: 'fd00::1' },
    ]);
  });

  test('dns with every field, nameservers canonicalised', () => {
    const config = parseIpamConfig({
      ...base,
      dns: {
        nameservers: ['10.0.0.53', '2001:DB8:0::1'],
        domain: 'cluster.local',
        search: ['svc.cluster.local'],
        options: ['ndots:5'],
      },
    });
    assert.deepEqual(config.dns, {
      nameservers: ['10.0.0.53', '2001:db8::1'],
      domain: 'cluster.local',
      search: ['svc.cluster.local'],
      options: ['ndots:5'],
    });
    assert.deepEqual(parseIpamConfig({ ...base, dns: {} }).dns, {});
  });

  test('ipRanges for dual stack, each with its own keys', () => {
    const config = parseIpamConfig({
      type: 'warren',
      ipRanges: [
        {
          range: '10.0.0.0/24',
          range_start: '10.0.0.100',
          range_end: '10.0.0.110',
          exclude: ['10.0.0.105'],
          gateway: '10.0.0.1',
        },
        { range: 'fd00::/64', range_start: 'fd00::10', gateway: 'fd00::1', exclude: ['fd00::10/127'] },
      ],
    });
    assert.equal(config.ranges.length, 2);
    const [v4, v6] = config.ranges as [RangeSpec, RangeSpec];
    assert.equal(v4.family, 4);
    assert.equal(v4.first, ip('10.0.0.100'));
    assert.equal(v4.last, ip('10.0.0.110'));
    assert.equal(v4.gateway?.value, ip('10.0.0.1'));
    assert.equal(v6.family, 6);
    assert.equal(v6.subnet, 'fd00::/64');
    assert.equal(v6.first, ip('fd00::10'));
    assert.equal(v6.last, ip('fd00::ffff:ffff:ffff:ffff'));
    assert.equal(v6.gateway?.value, ip('fd00::1'));
    assert.deepEqual(v6.excluded, [
      [ip('fd00::10'), ip('fd00::11')],
      [ip('fd00::1'), ip('fd00::1')],
    ]);
  });

  test('a top-level range beside ipRanges', () => {
    const config = parseIpamConfig({ ...base, ipRanges: [{ range: 'fd00::/120' }] });
    assert.deepEqual(
      config.ranges.map((r) => r.subnet),
      ['10.0.0.0/24', 'fd00::/120'],
    );
  });

  test('a top-level gateway applied to the range that contains it', () => {
    const config = parseIpamConfig({
      type: 'warren',
      gateway: 'fd00::1',
      ipRanges: [{ range: '10.0.0.0/24' }, { range: 'fd00::/64' }],
    });
    const [v4, v6] = config.ranges as [RangeSpec, RangeSpec];
    assert.equal(v4.gateway, undefined);
    assert.equal(v6.gateway?.value, ip('fd00::1'));
  });

  test('a top-level gateway repeated as the gateway of an ipRanges entry', () => {
    // Regression: the check that the top-level gateway lies in some range compared objects, so
    // the same address written again on the entry was reported as "not inside any range".
    const config = parseIpamConfig({
      type: 'warren',
      gateway: '10.0.0.1',
      ipRanges: [{ range: '10.0.0.0/24', gateway: '10.0.0.1' }],
    });
    assert.equal(only(config).gateway?.value, ip('10.0.0.1'));
  });

  test('network_name, which gives the same subnet a separate pool', () => {
    const plain = only(parseIpamConfig(base));
    const blue = only(parseIpamConfig({ ...base, network_name: 'blue' }));
    const green = only(parseIpamConfig({ ...base, network_name: 'green' }));
    assert.equal(blue.subnet, plain.subnet);
    assert.equal(parseIpamConfig({ ...base, network_name: 'blue' }).networkName, 'blue');
    assert.equal(new Set([plain.pool, blue.pool, green.pool]).size, 3);
    assert.equal(blue.pool, '10.0.0.0/24@blue');
  });

  test("whereabouts' start-end/length form", () => {
    const range = only(parseIpamConfig({ type: 'warren', range: '10.0.0.5-10.0.0.9/24' }));
    assert.equal(range.subnet, '10.0.0.0/24');
    assert.equal(range.first, ip('10.0.0.5'));
    assert.equal(range.last, ip('10.0.0.9'));
    assert.equal(capacityOf(range), 5n);
    const v6 = only(parseIpamConfig({ type: 'warren', range: 'fd00::10-fd00::1f/64' }));
    assert.equal(v6.subnet, 'fd00::/64');
    assert.equal(capacityOf(v6), 16n);
  });

  test('Warren’s socket and cooldown beside whereabouts keys', () => {
    const config = parseIpamConfig({
      ...base,
      enable_overlapping_ranges: false,
      log_file: '/var/log/whereabouts.log',
      log_level: 'debug',
      socket: '/run/warren/agent.sock',
      cooldown_seconds: 30,
    });
    assert.equal(config.socket, '/run/warren/agent.sock');
    assert.equal(config.cooldownSeconds, 30);
    assert.equal(parseIpamConfig({ ...base, cooldown_seconds: 86_400 }).cooldownSeconds, 86_400);
    assert.equal(parseIpamConfig({ ...base, enable_overlapping_ranges: true }).ranges.length, 1);
    assert.deepEqual(parseIpamConfig(base).ignoredKeys, []);
  });

  test('a custom path prefix for messages', () => {
    assert.throws(() => parseIpamConfig({ type: 'warren' }, 'plugins[0].ipam'), {
      code: 'INVALID_CONFIG',
      message: /^plugins\[0\]\.ipam: /,
    });
  });
});

describe('parseIpamConfig refuses', () => {
  test('a value that is not an object', () => {
    for (const value of [null, undefined, 'x', 1, true, [], [base]]) rejects(value, 'ipam');
  });

  test('unknown keys, naming them, at every level', () => {
    rejects({ ...base, bogus: 1 }, 'ipam.bogus', /unknown key/);
    rejects({ ...base, Range: '10.0.0.0/24' }, 'ipam.Range', /unknown key/);
    rejects(
      { type: 'warren', ipRanges: [{ range: '10.0.0.0/24' }, { range: 'fd00::/64', routes: [] }] },
      'ipam.ipRanges[1].routes',
      /unknown key/,
    );
    rejects({ ...base, routes: [{ dst: '0.0.0.0/0', via: '10.0.0.1' }] }, 'ipam.routes[0].via', /unknown key/);
    rejects({ ...base, dns: { nameserver: ['10.0.0.53'] } }, 'ipam.dns.nameserver', /unknown key/);
  });

  test('several unknown keys in one message that names every one, at every level', () => {
    rejects({ ...base, foo: 1, bar: 2 }, 'ipam', /^ipam: unknown keys "foo", "bar"$/);
    rejects(
      { type: 'warren', ipRanges: [{ range: '10.0.0.0/24', routes: [], dns: {} }] },
      'ipam.ipRanges[0]',
      /unknown keys "routes", "dns"$/,
    );
    rejects(
      { ...base, routes: [{ dst: '0.0.0.0/0', via: '10.0.0.1', dev: 'eth0' }] },
      'ipam.routes[0]',
      /unknown keys "via", "dev"$/,
    );
    rejects(
      { ...base, dns: { nameserver: [], searches: [] } },
      'ipam.dns',
      /unknown keys "nameserver" \(did you mean "nameservers"\?\), "searches" \(did you mean "search"\?\)$/,
    );
    rejects(
      { ...base, kubernetes: { kubeconfig: '/k', kube_config: '/k', api: 'x' } },
      'ipam.kubernetes',
      /unknown keys "kube_config" \(did you mean "kubeconfig"\?\), "api"$/,
    );
  });

  test('an unknown key close to a known one, suggesting the known one', () => {
    rejects(
      { ...base, rnage_start: '10.0.0.5' },
      'ipam.rnage_start',
      /^ipam\.rnage_start: unknown key \(did you mean "range_start"\?\)$/,
    );
    rejects({ ...base, Range: '10.0.0.0/24' }, 'ipam.Range', /did you mean "range"/);
    rejects({ ...base, iprange: [] }, 'ipam.iprange', /did you mean "ipRanges"/);
    rejects({ ...base, etcd_hosts: 'x' }, 'ipam.etcd_hosts', /did you mean "etcd_host"/);
    rejects({ ...base, xyz: 1 }, 'ipam.xyz', /^ipam\.xyz: unknown key$/);
  });

  test('unknown keys that are not plain names, quoted and escaped rather than pasted into the path', () => {
    rejects({ ...base, 'a b\n': 1 }, 'ipam', /^ipam: unknown key "a b\\n"$/);
    const many = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`k${i}`, i]));
    rejects({ ...base, ...many }, 'ipam', /"k19" and 5 more$/);
  });

  test('wrong types, naming the key', () => {
    rejects({ range: '10.0.0.0/24' }, 'ipam.type');
    rejects({ ...base, type: 1 }, 'ipam.type');
    rejects({ ...base, range: 24 }, 'ipam.range');
    rejects({ ...base, range_start: 10 }, 'ipam.range_start');
    rejects({ ...base, range_end: null }, 'ipam.range_end');
    rejects({ ...base, exclude: '10.0.0.0/28' }, 'ipam.exclude');
    rejects({ ...base, exclude: [7] }, 'ipam.exclude[0]');
    rejects({ ...base, gateway: true }, 'ipam.gateway');
    rejects({ ...base, routes: {} }, 'ipam.routes');
    rejects({ ...base, routes: ['0.0.0.0/0'] }, 'ipam.routes[0]');
    rejects({ ...base, routes: [{}] }, 'ipam.routes[0].dst');
    rejects({ ...base, routes: [{ dst: '0.0.0.0/0', gw: 1 }] }, 'ipam.routes[0].gw');
    rejects({ ...base, dns: [] }, 'ipam.dns');
    rejects({ ...base, dns: { nameservers: '10.0.0.53' } }, 'ipam.dns.nameservers');
    rejects({ ...base, dns: { nameservers: [1] } }, 'ipam.dns.nameservers[0]');
    rejects({ ...base, dns: { domain: 1 } }, 'ipam.dns.domain');
    rejects({ ...base, dns: { search: [null] } }, 'ipam.dns.search[0]');
    rejects({ ...base, dns: { options: 'ndots:5' } }, 'ipam.dns.options');
    rejects({ type: 'warren', ipRanges: {} }, 'ipam.ipRanges');
    rejects({ type: 'warren', ipRanges: ['10.0.0.0/24'] }, 'ipam.ipRanges[0]');
    rejects({ type: 'warren', ipRanges: [{ range: '10.0.0.0/24' }, { range: 10 }] }, 'ipam.ipRanges[1].range');
    rejects({ type: 'warren', ipRanges: [{}] }, 'ipam.ipRanges[0].range');
    rejects({ ...base, network_name: 5 }, 'ipam.network_name');
    rejects({ ...base, enable_overlapping_ranges: 'true' }, 'ipam.enable_overlapping_ranges');
    rejects({ ...base, log_file: 1 }, 'ipam.log_file');
    rejects({ ...base, log_level: {} }, 'ipam.log_level');
    rejects({ ...base, socket: 1 }, 'ipam.socket');
    rejects({ ...base, cooldown_seconds: '30' }, 'ipam.cooldown_seconds');
  });

  test('bad values of the right type, naming the key', () => {
    rejects({ ...base, range: '10.0.0.0' }, 'ipam.range', /not a CIDR/);
    rejects({ ...base, range: '10.0.0.0/33' }, 'ipam.range');
    rejects({ ...base, range: 'fd00::/129' }, 'ipam.range');
    rejects({ ...base, range_start: '10.0.0.256' }, 'ipam.range_start', /not an IP address/);
    rejects({ ...base, gateway: 'gateway' }, 'ipam.gateway');
    rejects({ ...base, exclude: ['10.0.0.300'] }, 'ipam.exclude[0]');
    rejects({ ...base, routes: [{ dst: '10.0.0.1' }] }, 'ipam.routes[0].dst', /not a CIDR/);
    rejects({ ...base, routes: [{ dst: '0.0.0.0/0', gw: 'fd00::1' }] }, 'ipam.routes[0].gw');
    rejects({ ...base, dns: { nameservers: ['10.0.0.53', 'dns.example'] } }, 'ipam.dns.nameservers[1]');
    rejects({ ...base, network_name: 'n'.repeat(254) }, 'ipam.network_name', /at most 253/);
    rejects({ ...base, socket: 'run/warren.sock' }, 'ipam.socket', /absolute/);
    for (const c of [-1, 1.5, 86_401, Number.MAX_SAFE_INTEGER])
      rejects({ ...base, cooldown_seconds: c }, 'ipam.cooldown_seconds');
    for (const b of [7, 33, 26.5, '26', null])
      rejects({ ...base, range: '10.0.0.0/8', block_size: b }, 'ipam.block_size', /prefix length from 8/);
    rejects(
      { type: 'warren', ipRanges: [{ range: 'fd00::/64', block_size: 26 }] },
      'ipam.ipRanges[0].block_size',
      /from 64 .* to 128/,
    );
    rejects({ ...base, store: 'redis' }, 'ipam.store', /"sqlite" or "etcd"/);
  });

  test('block sizes: defaults per family, never shorter than the range, per range or shared', () => {
    const one = parseIpamConfig({
      type: 'warren',
      ipRanges: [{ range: '10.0.0.0/16' }, { range: 'fd00::/64' }, { range: '10.1.0.0/28' }],
    });
    assert.deepEqual(
      one.ranges.map((r) => r.blockPrefix),
      [26, 122, 28],
    );
    const shared = parseIpamConfig({
      type: 'warren',
      block_size: 24,
      ipRanges: [{ range: '10.0.0.0/16' }, { range: '10.2.0.0/16', block_size: 30 }],
    });
    assert.deepEqual(
      shared.ranges.map((r) => r.blockPrefix),
      [24, 30],
    );
    assert.equal(parseIpamConfig({ type: 'warren', range: '10.0.0.0/16', store: 'etcd' }).store, 'etcd');
  });

  test('range_start or range_end outside the range', () => {
    rejects({ ...base, range_start: '10.0.1.1' }, 'ipam.range_start', /outside/);
    rejects({ ...base, range_end: '10.0.1.1' }, 'ipam.range_end', /outside/);
    rejects({ ...base, range_start: 'fd00::1' }, 'ipam.range_start', /outside/);
    rejects(
      { type: 'warren', ipRanges: [{ range: 'fd00::/64', range_end: 'fd00:0:0:1::' }] },
      'ipam.ipRanges[0].range_end',
      /outside/,
    );
  });

  test('range_end before range_start', () => {
    rejects({ ...base, range_start: '10.0.0.20', range_end: '10.0.0.10' }, 'ipam.range_end', /before/);
  });

  test('a start-end range whose end comes before its start, naming range', () => {
    // Regression: this was reported at "ipam.range_end", a key the config does not have.
    rejects({ type: 'warren', range: '10.0.0.50-10.0.0.10/24' }, 'ipam.range', /before/);
  });

  test('malformed start-end ranges', () => {
    rejects({ type: 'warren', range: '10.0.0.5-10.0.0.9' }, 'ipam.range');
    rejects({ type: 'warren', range: '10.0.0.5-10.0.1.9/24' }, 'ipam.range', /outside/);
    rejects({ type: 'warren', range: '10.0.0.5-fd00::9/24' }, 'ipam.range');
    rejects({ type: 'warren', range: '10.0.0.5-x/24' }, 'ipam.range');
    rejects(
      { type: 'warren', range: '10.0.0.5-10.0.0.9/24', range_start: '10.0.0.6' },
      'ipam.range',
      /cannot be combined/,
    );
  });

  test('a span with no allocatable address', () => {
    rejects({ ...base, range_start: '10.0.0.255' }, 'ipam.range', /no allocatable/);
  });

  test('range keys without a range', () => {
    rejects(
      { type: 'warren', range_start: '10.0.0.1', ipRanges: [{ range: '10.0.0.0/24' }] },
      'ipam.range_start',
      /needs "range"/,
    );
    rejects({ type: 'warren', range_end: '10.0.0.1' }, 'ipam.range_end');
    rejects({ type: 'warren', exclude: [] }, 'ipam.exclude');
  });

  test('an exclusion of the other family', () => {
    rejects({ ...base, exclude: ['fd00::/64'] }, 'ipam.exclude[0]', /IPv6 exclusion in IPv4/);
    rejects(
      { type: 'warren', ipRanges: [{ range: 'fd00::/64', exclude: ['fd00::1', '10.0.0.0/8'] }] },
      'ipam.ipRanges[0].exclude[1]',
    );
  });

  test('a gateway of a family no range has', () => {
    rejects({ ...base, gateway: 'fd00::1' }, 'ipam.gateway', /IPv6 gateway fd00::1 but no IPv6 range/);
    rejects(
      { type: 'warren', ipRanges: [{ range: '10.0.0.0/24', gateway: 'fd00::1' }] },
      'ipam.ipRanges[0].gateway',
      /IPv6 gateway for IPv4 range/,
    );
  });

  test('the same range twice, naming both places', () => {
    rejects(
      { ...base, ipRanges: [{ range: '10.0.0.0/24' }] },
      'ipam.ipRanges[0].range',
      /10\.0\.0\.0\/24 is listed twice \(also at ipam\.range\)/,
    );
    rejects(
      { type: 'warren', ipRanges: [{ range: 'fd00::/64' }, { range: 'fd00:0::/64', range_start: 'fd00::9' }] },
      'ipam.ipRanges[1].range',
      /fd00::\/64 is listed twice \(also at ipam\.ipRanges\[0\]\.range\)/,
    );
    // Equal once host bits are masked off, as whereabouts masks them.
    rejects(
      { type: 'warren', ipRanges: [{ range: '10.0.0.5/24' }, { range: '10.0.0.9/24' }] },
      'ipam.ipRanges[1].range',
      /listed twice/,
    );
  });

  test('no range at all', () => {
    rejects({ type: 'warren' }, 'ipam', /needs "range"/);
    rejects({ type: 'warren', ipRanges: [] }, 'ipam', /needs "range"/);
  });
});

describe("whereabouts' leniency, kept", () => {
  test('host bits in range are masked: the range is the network, and allocation starts after the network address', () => {
    // Whereabouts' README example. pkg/config masks the written address off; the first usable
    // address is the network's first host, not the address written.
    const range = only(parseIpamConfig({ type: 'whereabouts', range: '192.168.2.225/28' }));
    assert.equal(range.subnet, '192.168.2.224/28');
    assert.equal(range.network, ip('192.168.2.224'));
    assert.equal(range.first, ip('192.168.2.225'));
    assert.equal(range.last, ip('192.168.2.238'));
    assert.equal(range.pool, '192.168.2.224/28');
    const later = only(parseIpamConfig({ type: 'whereabouts', range: '192.168.2.230/28' }));
    assert.equal(later.first, ip('192.168.2.225'), 'the address written is not range_start');
    const v6 = only(parseIpamConfig({ type: 'whereabouts', range: 'abcd::1/64' }));
    assert.equal(v6.subnet, 'abcd::/64');
    assert.equal(v6.first, ip('abcd::1'));
  });

  test('host bits in exclude entries are masked to their network', () => {
    const range = only(
      parseIpamConfig({
        type: 'whereabouts',
        range: '192.168.2.225/28',
        exclude: ['192.168.2.229/30', '192.168.2.236/32'],
      }),
    );
    assert.deepEqual(range.excluded, [
      [ip('192.168.2.228'), ip('192.168.2.231')],
      [ip('192.168.2.236'), ip('192.168.2.236')],
    ]);
    assert.equal(capacityOf(range), 14n - 4n - 1n);
  });

  test('host bits in a route destination are masked', () => {
    const config = parseIpamConfig({ ...base, routes: [{ dst: '10.9.0.1/16', gw: '10.0.0.1' }, { dst: 'fd00::1/8' }] });
    assert.deepEqual(config.routes, [{ dst: '10.9.0.0/16', gw: '10.0.0.1' }, { dst: 'fd00::/8' }]);
  });

  test('a top-level gateway outside every range, reported with each range of its family and not excluded', () => {
    const config = parseIpamConfig({
      type: 'whereabouts',
      gateway: '192.168.2.1',
      ipRanges: [{ range: '192.168.2.225/28' }, { range: '10.0.0.0/24' }, { range: 'fd00::/64' }],
    });
    const [a, b, v6] = config.ranges as [RangeSpec, RangeSpec, RangeSpec];
    assert.equal(a.gateway?.value, ip('192.168.2.1'));
    assert.equal(b.gateway?.value, ip('192.168.2.1'));
    assert.equal(v6.gateway, undefined, 'an IPv4 gateway is not reported with IPv6 addresses');
    assert.deepEqual(a.excluded, []);
    assert.deepEqual(b.excluded, []);
  });

  test('a gateway inside a range is reported and never handed out', () => {
    const config = parseIpamConfig({
      type: 'whereabouts',
      gateway: '10.0.0.1',
      ipRanges: [{ range: '10.0.0.0/24' }, { range: '10.1.0.0/24' }],
    });
    const [inside, outside] = config.ranges as [RangeSpec, RangeSpec];
    assert.deepEqual(inside.excluded, [[ip('10.0.0.1'), ip('10.0.0.1')]]);
    assert.deepEqual(outside.excluded, []);
    assert.equal(outside.gateway?.value, ip('10.0.0.1'));
  });

  test('an ipRanges gateway outside its range, for off-link gateways', () => {
    const range = only(parseIpamConfig({ type: 'warren', ipRanges: [{ range: '10.0.0.0/24', gateway: '10.0.1.1' }] }));
    assert.equal(range.gateway?.value, ip('10.0.1.1'));
    assert.deepEqual(range.excluded, []);
  });

  test('enable_l3 at the top makes every address of every range allocatable', () => {
    const config = parseIpamConfig({
      type: 'whereabouts',
      enable_l3: true,
      range: '10.0.0.0/24',
      ipRanges: [{ range: 'fd00::/120', enable_l3: false }],
    });
    const [v4, v6] = config.ranges as [RangeSpec, RangeSpec];
    assert.equal(v4.first, ip('10.0.0.0'));
    assert.equal(v4.last, ip('10.0.0.255'));
    assert.equal(v6.first, ip('fd00::'), 'a per-range false does not undo the top-level true, as in whereabouts');
    assert.equal(capacityOf(v4), 256n);
  });

  test('enable_l3 on one ipRanges entry applies to that entry only', () => {
    const config = parseIpamConfig({
      type: 'whereabouts',
      ipRanges: [{ range: '10.0.0.0/24', enable_l3: true }, { range: '192.168.1.0/24' }],
    });
    const [l3, l2] = config.ranges as [RangeSpec, RangeSpec];
    assert.deepEqual([l3.first, l3.last], [ip('10.0.0.0'), ip('10.0.0.255')]);
    assert.deepEqual([l2.first, l2.last], [ip('192.168.1.1'), ip('192.168.1.254')]);
    rejects({ type: 'whereabouts', enable_l3: 'yes', range: '10.0.0.0/24' }, 'ipam.enable_l3', /boolean/);
    rejects(
      { type: 'whereabouts', ipRanges: [{ range: '10.0.0.0/24', enable_l3: 1 }] },
      'ipam.ipRanges[0].enable_l3',
      /boolean/,
    );
  });

  test('an empty addresses list, and a refusal naming the reason for static addresses', () => {
    assert.equal(parseIpamConfig({ ...base, addresses: [] }).ranges.length, 1);
    rejects({ ...base, addresses: [{ address: '10.0.0.9/24' }] }, 'ipam.addresses', /same address.*\/32/);
    rejects({ ...base, addresses: {} }, 'ipam.addresses', /must be a list/);
  });
});

describe('whereabouts keys Warren ignores', () => {
  const everyIgnoredKey = {
    datastore: 'kubernetes',
    etcd_host: 'etcd.example:2379',
    etcd_username: 'user',
    etcd_password: 'hunter2',
    etcd_key_file: '/k.pem',
    etcd_cert_file: '/c.pem',
    etcd_ca_cert_file: '/ca.pem',
    kubernetes: {
      kubeconfig: '/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig',
      k8s_api_root: 'https://10.96.0.1',
    },
    configuration_path: '/etc/cni/net.d/whereabouts.d/whereabouts.conf',
    leader_lease_duration: 1500,
    leader_renew_deadline: 1000,
    leader_retry_period: 500,
    optimistic_ipam: true,
    reconciler_cron_expression: '30 4 * * *',
    sleep_for_race: 0,
    node_slice_size: '/28',
    log_file: '/tmp/whereabouts.log',
    log_level: 'debug',
  };

  test('are accepted and each reported once, in the order written, with a reason', () => {
    const config = parseIpamConfig({ type: 'whereabouts', range: '10.0.0.0/24', ...everyIgnoredKey });
    assert.deepEqual(
      config.ignoredKeys.map((k) => k.path),
      Object.keys(everyIgnoredKey).map((k) => `ipam.${k}`),
    );
    for (const { reason } of config.ignoredKeys) assert.ok(reason.length > 10, reason);
    assert.match(config.ignoredKeys.find((k) => k.path === 'ipam.etcd_host')?.reason ?? '', /datastore/);
    assert.deepEqual(
      config.ranges.map((r) => r.subnet),
      ['10.0.0.0/24'],
      'nothing else changes',
    );
  });

  test('carry the caller’s path prefix', () => {
    const config = parseIpamConfig({ type: 'whereabouts', range: '10.0.0.0/24', etcd_host: 'x' }, 'plugins[1].ipam');
    assert.deepEqual(
      config.ignoredKeys.map((k) => k.path),
      ['plugins[1].ipam.etcd_host'],
    );
  });

  test('exclude_gateway is reported only when it asks for what Warren never does; enable_overlapping_ranges is honoured', () => {
    assert.deepEqual(
      parseIpamConfig({ ...base, enable_overlapping_ranges: true, exclude_gateway: true }).ignoredKeys,
      [],
    );
    const config = parseIpamConfig({ ...base, enable_overlapping_ranges: false, exclude_gateway: false });
    assert.deepEqual(
      config.ignoredKeys.map((k) => k.path),
      ['ipam.exclude_gateway'],
    );
    // false keeps the range apart from the network_name's other ranges: a pool key of its own space.
    assert.equal(only(config).pool, `${only(parseIpamConfig(base)).subnet}@@`);
    const named = parseIpamConfig({ ...base, network_name: 'blue', enable_overlapping_ranges: false });
    assert.deepEqual(parsePoolKey(only(named).pool), {
      family: 4,
      network: only(named).network,
      prefixLength: only(named).prefixLength,
      networkName: 'blue',
      isolated: true,
    });
    rejects({ ...base, exclude_gateway: 'true' }, 'ipam.exclude_gateway', /boolean/);
  });

  test('accept null, as whereabouts’ decoder does', () => {
    const nulls = Object.fromEntries(Object.keys(everyIgnoredKey).map((k) => [k, null]));
    assert.equal(parseIpamConfig({ ...base, ...nulls }).ignoredKeys.length, Object.keys(everyIgnoredKey).length);
    assert.equal(parseIpamConfig({ ...base, kubernetes: { kubeconfig: null } }).ignoredKeys.length, 1);
  });

  test('with a value of the wrong type are refused, naming the key', () => {
    rejects({ ...base, etcd_host: 2379 }, 'ipam.etcd_host', /must be a string, got number 2379/);
    rejects({ ...base, datastore: ['kubernetes'] }, 'ipam.datastore', /must be a string/);
    rejects({ ...base, node_slice_size: 28 }, 'ipam.node_slice_size', /must be a string/);
    rejects({ ...base, leader_lease_duration: '1500' }, 'ipam.leader_lease_duration', /whole number/);
    rejects({ ...base, sleep_for_race: 1.5 }, 'ipam.sleep_for_race', /whole number/);
    rejects({ ...base, optimistic_ipam: 'true' }, 'ipam.optimistic_ipam', /boolean/);
    rejects({ ...base, kubernetes: '/etc/kubeconfig' }, 'ipam.kubernetes', /must be an object/);
    rejects({ ...base, kubernetes: { kubeconfig: 1 } }, 'ipam.kubernetes.kubeconfig', /must be a string/);
    rejects({ ...base, log_level: {} }, 'ipam.log_level', /must be a string/);
  });

  test('never echo an etcd password in an error', () => {
    for (const password of [1234567, ['hunter2'], { secret: 'hunter2' }, true]) {
      assert.throws(
        () => parseIpamConfig({ ...base, etcd_password: password }),
        (error: unknown) =>
          error instanceof WarrenError &&
          /^ipam\.etcd_password: must be a string \(the value is not shown\)$/.test(error.message),
      );
    }
  });
});

describe('ranges of one config never share an address', () => {
  test('a range inside another, top-level and ipRanges, named by both paths and CIDRs', () => {
    rejects(
      { type: 'whereabouts', range: '10.232.2.0/24', ipRanges: [{ range: '10.232.2.0/25' }] },
      'ipam.ipRanges[0].range',
      /^ipam\.ipRanges\[0\]\.range: 10\.232\.2\.0\/25 overlaps 10\.232\.2\.0\/24 at ipam\.range: ranges of one network must not share addresses$/,
    );
  });

  test('two ipRanges entries, the wider written second, reported at the later one', () => {
    rejects(
      { type: 'whereabouts', ipRanges: [{ range: 'fd00::/120' }, { range: '10.0.1.0/24' }, { range: '10.0.0.0/23' }] },
      'ipam.ipRanges[2].range',
      /10\.0\.0\.0\/23 overlaps 10\.0\.1\.0\/24 at ipam\.ipRanges\[1\]\.range/,
    );
    rejects(
      { type: 'whereabouts', ipRanges: [{ range: 'fd00::/64' }, { range: 'fd00::100/120' }] },
      'ipam.ipRanges[1].range',
      /fd00::100\/120 overlaps fd00::\/64/,
    );
  });

  test('whatever enable_overlapping_ranges says, and whatever range_start and range_end keep apart', () => {
    for (const enable_overlapping_ranges of [true, false]) {
      rejects(
        { type: 'whereabouts', enable_overlapping_ranges, range: '10.0.0.0/23', ipRanges: [{ range: '10.0.1.0/24' }] },
        'ipam.ipRanges[0].range',
        /overlaps .* whatever enable_overlapping_ranges says/,
      );
    }
    // Disjoint spans, one subnet: still one pool, so still refused.
    rejects(
      {
        type: 'whereabouts',
        ipRanges: [
          { range: '10.0.0.0/24', range_end: '10.0.0.9' },
          { range: '10.0.0.0/25', range_start: '10.0.0.100' },
        ],
      },
      'ipam.ipRanges[1].range',
      /overlaps/,
    );
  });

  test('neighbouring and other-family ranges are fine', () => {
    const config = parseIpamConfig({
      type: 'whereabouts',
      range: '10.0.0.0/24',
      ipRanges: [{ range: '10.0.1.0/24' }, { range: '::/0' }, { range: '0.0.0.0/31' }],
    });
    assert.equal(config.ranges.length, 4);
  });
});

describe('network_name and pool keys', () => {
  test('a network_name with a character of the key encoding is refused, saying why (regression: "#" broke retries, CHECK and release by address)', () => {
    for (const name of [
      'a#b',
      '#',
      'a@b',
      'a/b',
      'a b',
      'tab\there',
      'nl\n',
      'nul\u0000',
      'del\u007f',
      'nbsp\u00a0x',
    ]) {
      rejects(
        { ...base, network_name: name },
        'ipam.network_name',
        /must not contain .*separate the parts of Warren's pool and block keys/,
      );
    }
    rejects(
      { ...base, network_name: 'blue#1' },
      'ipam.network_name',
      /^ipam\.network_name: "blue#1" must not contain "#" \(found at character 5\)/,
    );
    rejects({ ...base, network_name: 'x\u0001' }, 'ipam.network_name', /"x\\u0001" must not contain "\\u0001"/);
  });

  test('names the key encoding can carry are accepted and round-trip through the pool key', () => {
    for (const name of ['blue', 'tenant-a.net_1', 'ünïcode', 'n'.repeat(253), 'a:b', 'a%23b']) {
      const config = parseIpamConfig({ ...base, network_name: name });
      const range = only(config);
      assert.equal(range.pool, `10.0.0.0/24@${name}`);
      assert.deepEqual(parsePoolKey(range.pool), {
        family: 4,
        network: ip('10.0.0.0'),
        prefixLength: 24,
        networkName: name,
      });
    }
  });

  test('parsePoolKey reads back what poolKeyOf wrote, for random subnets and names', () => {
    const name = fc.oneof(
      fc.constant(''),
      fc.string({ minLength: 1, maxLength: 20 }).filter((n) => networkNameProblem(n) === undefined),
    );
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
        fc.nat(128),
        name,
        fc.boolean(),
        (v6, value, length, networkName, apart) => {
          const family = v6 ? 6 : 4;
          const bits = v6 ? 128 : 32;
          const prefixLength = length % (bits + 1);
          const host = (1n << BigInt(bits - prefixLength)) - 1n;
          const network = value & ((1n << BigInt(bits)) - 1n) & ~host;
          const subnet = { family, network, prefixLength } as const;
          assert.deepEqual(
            parsePoolKey(poolKeyOf(subnet, networkName, apart)),
            apart ? { ...subnet, networkName, isolated: true } : { ...subnet, networkName },
          );
        },
      ),
      { numRuns: 300 },
    );
  });

  test('parsePoolKey gives undefined for what is not a range pool key', () => {
    for (const key of [
      '',
      '10.0.0.0',
      '10.0.0.5/24',
      '10.0.0.0/33',
      '10.0.0.0/24@',
      '10.0.0.0/24@a b',
      '10.0.0.0/24#10.0.0.0/26',
      '10.0.0.0/24@blue#10.0.0.0/26',
      'blue@10.0.0.0/24',
      'x',
    ]) {
      assert.equal(parsePoolKey(key), undefined, key);
    }
    assert.deepEqual(parsePoolKey('fd00::/64@a@b'), undefined, 'a name cannot hold a second "@"');
    assert.deepEqual(parsePoolKey('fd00::/64@@a@'), undefined, 'a range kept apart has one name, "@"-free');
    assert.deepEqual(parsePoolKey('fd00::/64@@')?.isolated, true, 'a range kept apart, without a network_name');
    assert.deepEqual(parsePoolKey('fd00::/64'), {
      family: 6,
      network: ip('fd00::'),
      prefixLength: 64,
      networkName: '',
    });
  });

  test('subnetsOverlap is true exactly when the subnets share an address', () => {
    const key = (k: string) => parsePoolKey(k) ?? assert.fail(k);
    assert.equal(subnetsOverlap(key('10.232.2.0/24'), key('10.232.2.0/25')), true);
    assert.equal(subnetsOverlap(key('10.232.2.128/25'), key('10.232.2.0/24')), true);
    assert.equal(subnetsOverlap(key('10.232.2.0/24'), key('10.232.3.0/24')), false);
    assert.equal(subnetsOverlap(key('10.0.0.0/23'), key('10.0.1.0/24')), true);
    assert.equal(subnetsOverlap(key('0.0.0.0/0'), key('255.255.255.255/32')), true);
    assert.equal(subnetsOverlap(key('::/0'), key('0.0.0.0/0')), false, 'families never overlap');
    assert.equal(subnetsOverlap(key('fd00::/64'), key('fd00:0:0:1::/64')), false);
    fc.assert(
      fc.property(
        fc.nat(255),
        fc.integer({ min: 24, max: 32 }),
        fc.nat(255),
        fc.integer({ min: 24, max: 32 }),
        (a, la, b, lb) => {
          const net = (n: number, l: number) => n & ~((1 << (32 - l)) - 1);
          const x = key(`10.0.0.${net(a, la)}/${la}`);
          const y = key(`10.0.0.${net(b, lb)}/${lb}`);
          const addresses = (s: typeof x) =>
            new Set(Array.from({ length: 2 ** (32 - s.prefixLength) }, (_, i) => s.network + BigInt(i)));
          const shared = [...addresses(x)].some((v) => addresses(y).has(v));
          assert.equal(subnetsOverlap(x, y), shared);
          assert.equal(subnetsOverlap(y, x), shared);
        },
      ),
      { numRuns: 300 },
    );
  });

  test('poolsOverlap needs the same network_name as well', () => {
    const key = (k: string) => parsePoolKey(k) ?? assert.fail(k);
    assert.equal(poolsOverlap(key('10.0.0.0/24@blue'), key('10.0.0.0/25@blue')), true);
    assert.equal(poolsOverlap(key('10.0.0.0/24@blue'), key('10.0.0.0/25@green')), false);
    assert.equal(poolsOverlap(key('10.0.0.0/24'), key('10.0.0.0/24@blue')), false);
    assert.equal(poolsOverlap(key('10.0.0.0/24'), key('10.0.0.0/23')), true);
  });
});

describe('capacityOf', () => {
  function capacity(config: object): bigint {
    return capacityOf(only(parseIpamConfig({ type: 'warren', ...config })));
  }

  test('a /24 loses its network and broadcast addresses', () => {
    assert.equal(capacity({ range: '10.0.0.0/24' }), 254n);
  });

  test('the gateway is not counted', () => {
    assert.equal(capacity({ range: '10.0.0.0/24', gateway: '10.0.0.1' }), 253n);
  });

  test('overlapping exclusions, and the gateway inside them, are counted once', () => {
    assert.equal(
      capacity({
        range: '10.0.0.0/24',
        gateway: '10.0.0.1',
        exclude: ['10.0.0.0/28', '10.0.0.2', '10.0.0.0/30', '10.0.0.8/29'],
      }),
      254n - 15n,
    );
  });

  test('exclusions of the network and broadcast addresses change nothing', () => {
    assert.equal(capacity({ range: '10.0.0.0/24', exclude: ['10.0.0.0/32', '10.0.0.255/32'] }), 254n);
    assert.equal(capacity({ range: '10.0.0.0/24', exclude: ['10.0.0.0/16'] }), 0n);
  });

  test('exclusions outside range_start and range_end change nothing', () => {
    assert.equal(
      capacity({
        range: '10.0.0.0/24',
        range_start: '10.0.0.10',
        range_end: '10.0.0.19',
        exclude: ['10.0.0.0/29', '10.0.0.18/31'],
      }),
      8n,
    );
  });

  test('point-to-point prefixes use every address', () => {
    assert.equal(capacity({ range: '10.0.0.0/31' }), 2n);
    assert.equal(capacity({ range: '10.0.0.7/32' }), 1n);
    assert.equal(capacity({ range: 'fd00::/127' }), 2n);
    assert.equal(capacity({ range: 'fd00::7/128' }), 1n);
  });

  test('IPv6 reserves only the network address', () => {
    assert.equal(capacity({ range: 'fd00::/64' }), (1n << 64n) - 1n);
    assert.equal(capacity({ range: 'fd00::/120' }), 255n);
    assert.equal(capacity({ range: 'fd00::/64', gateway: 'fd00::1' }), (1n << 64n) - 2n);
  });

  test('equals a count of the addresses one by one, for random small ranges', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 24, max: 32 }),
        fc.nat(255),
        fc.nat(255),
        fc.array(fc.tuple(fc.nat(255), fc.integer({ min: 26, max: 32 })), { maxLength: 5 }),
        fc.option(fc.nat(255)),
        (length, a, b, excludes, gw) => {
          const size = 1 << (32 - length);
          const at = (n: number): string => `10.0.0.${n % size}`;
          const config: Record<string, unknown> = { range: `10.0.0.0/${length}` };
          if (a % size <= b % size) {
            config.range_start = at(a);
            config.range_end = at(b);
          }
          config.exclude = excludes.map(([e, len]) => `10.0.0.${e & ~((1 << (32 - len)) - 1)}/${len}`);
          if (gw !== null) config.gateway = at(gw);
          let range: RangeSpec;
          try {
            range = only(parseIpamConfig({ type: 'warren', ...config }));
          } catch (error) {
            // range_start/range_end inside network or broadcast only: nothing allocatable.
            assert.ok(error instanceof WarrenError && /no allocatable/.test(error.message), String(error));
            return;
          }
          let count = 0n;
          for (let x = range.first; x <= range.last; x++) {
            if (!range.excluded.some(([from, to]) => x >= from && x <= to)) count++;
          }
          assert.equal(capacityOf(range), count);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('inSubnet', () => {
  test('is true across the whole subnet and false for the other family', () => {
    const range = only(parseIpamConfig({ ...base, range_start: '10.0.0.100' }));
    assert.equal(inSubnet(range, { family: 4, value: ip('10.0.0.0') }), true);
    assert.equal(inSubnet(range, { family: 4, value: ip('10.0.0.255') }), true);
    assert.equal(inSubnet(range, { family: 4, value: ip('10.0.1.0') }), false);
    assert.equal(inSubnet(range, { family: 6, value: ip('10.0.0.5') }), false);
  });
});

describe('parseIpamConfig on arbitrary input', () => {
  function onlyInvalidConfig(value: unknown): void {
    try {
      parseIpamConfig(value);
    } catch (error) {
      assert.ok(error instanceof WarrenError, `threw a non-WarrenError: ${String(error)}`);
      assert.equal(error.code, 'INVALID_CONFIG');
      assert.match(error.message, /^ipam(\.|\[|:)/);
    }
  }

  test('any JSON value either parses or is refused with INVALID_CONFIG', () => {
    fc.assert(fc.property(fc.jsonValue(), onlyInvalidConfig), { numRuns: 500 });
  });

  /** Mostly `valid`, sometimes anything at all: deep enough to reach the success path. */
  const mostly = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
    fc.oneof({ arbitrary: valid, weight: 20 }, { arbitrary: anyValue, weight: 1 });
  const ipText = fc.oneof(
    fc.constantFrom('10.0.0.1', '10.0.0.0', '10.0.0.255', '10.0.1.1', 'fd00::1', 'fd00::', '::', '1.2.3', 'x', ''),
    fc.nat(255).map((b) => `10.0.0.${b}`),
    fc.nat(255).map((b) => `fd00::${b.toString(16)}`),
  );
  const cidrText = fc.oneof(
    fc.constantFrom(
      '10.0.0.0/24',
      '10.0.0.0/31',
      '10.0.0.5/24',
      'fd00::/64',
      'fd00::/120',
      '10.0.0.5-10.0.0.9/24',
      '10.0.0.0/33',
      '0.0.0.0/0',
    ),
    fc.tuple(ipText, fc.integer({ min: 0, max: 130 })).map(([a, len]) => `${a}/${len}`),
  );
  const networkText = fc.oneof(
    fc.constantFrom(
      '10.0.0.0/24',
      '10.0.0.0/28',
      '10.0.0.0/31',
      '10.0.0.7/32',
      'fd00::/64',
      'fd00::/120',
      'fd00::/127',
      '10.0.0.5-10.0.0.9/24',
    ),
    cidrText,
  );
  const anyValue: fc.Arbitrary<unknown> = fc.oneof(
    fc.jsonValue({ maxDepth: 2 }),
    fc.constantFrom('10.0.0.1', '10.0.0.0/24', 'fd00::/64', '1.2.3', ''),
    fc.array(fc.constantFrom('10.0.0.1', '10.0.0.0/28', 'fd00::1'), { maxLength: 3 }),
  );
  const rangeEntry = fc.record(
    {
      range: mostly(networkText),
      range_start: mostly(ipText),
      range_end: mostly(ipText),
      exclude: mostly(fc.array(cidrText, { maxLength: 3 })),
      gateway: mostly(ipText),
      enable_l3: mostly(fc.boolean()),
    },
    { requiredKeys: ['range'] },
  );
  const ipamValues = {
    type: mostly(fc.constant('warren')),
    range: mostly(networkText),
    range_start: mostly(ipText),
    range_end: mostly(ipText),
    exclude: mostly(fc.array(cidrText, { maxLength: 3 })),
    gateway: mostly(ipText),
    routes: mostly(
      fc.array(fc.record({ dst: mostly(networkText), gw: mostly(ipText) }, { requiredKeys: ['dst'] }), {
        maxLength: 2,
      }),
    ),
    dns: mostly(
      fc.record(
        {
          nameservers: mostly(fc.array(ipText, { maxLength: 2 })),
          domain: mostly(fc.string()),
          search: mostly(fc.array(fc.string(), { maxLength: 2 })),
          options: anyValue,
        },
        { requiredKeys: [] },
      ),
    ),
    ipRanges: mostly(fc.array(rangeEntry, { maxLength: 3 })),
    network_name: mostly(fc.constantFrom('', 'blue', 'green')),
    enable_overlapping_ranges: mostly(fc.boolean()),
    log_file: mostly(fc.constant('/var/log/w.log')),
    log_level: mostly(fc.constant('debug')),
    socket: mostly(fc.constant('/run/warren.sock')),
    cooldown_seconds: mostly(fc.integer({ min: 0, max: 86_400 })),
    block_size: mostly(fc.integer({ min: -1, max: 130 })),
    store: mostly(fc.constantFrom('sqlite', 'etcd', 'mongo')),
    enable_l3: mostly(fc.boolean()),
    exclude_gateway: mostly(fc.boolean()),
    addresses: mostly(fc.constant([])),
    datastore: mostly(fc.constantFrom('kubernetes', 'etcd')),
    etcd_host: mostly(fc.constant('etcd:2379')),
    etcd_password: mostly(fc.constant('hunter2')),
    kubernetes: mostly(
      fc.record(
        { kubeconfig: mostly(fc.constant('/k')), k8s_api_root: mostly(fc.constant('https://k')) },
        { requiredKeys: [] },
      ),
    ),
    leader_lease_duration: mostly(fc.integer()),
    node_slice_size: mostly(fc.constant('/28')),
    sleep_for_race: mostly(fc.nat(10)),
    bogus: fc.constant(1),
  };
  /** A random subset of the known keys (and, rarely, an unknown one), each with a random value. */
  const ipamObject = fc
    .tuple(
      fc.record(ipamValues),
      fc.subarray(Object.keys(ipamValues).filter((k) => k !== 'bogus' && k !== 'type')),
      fc.integer({ min: 0, max: 19 }),
    )
    .map(([values, keys, roll]) => {
      const object: Record<string, unknown> = { type: values.type };
      for (const key of keys) object[key] = values[key as keyof typeof values];
      if (roll === 0) object.bogus = values.bogus;
      // Most configs name a range; without one, nothing past the first check is reached.
      if (roll > 4 && object.range === undefined && object.ipRanges === undefined) object.range = values.range;
      return object;
    });

  test('objects with random subsets of the known keys either parse or are refused with INVALID_CONFIG', () => {
    // Through JSON, as a runtime would hand them over.
    fc.assert(
      fc.property(ipamObject, (value) => onlyInvalidConfig(JSON.parse(JSON.stringify(value)))),
      { numRuns: 1000 },
    );
  });

  test('whatever parses has spans inside their subnets, gateways of their family excluded when in range, no shared address, and pool keys that read back', () => {
    let parsed = 0;
    fc.assert(
      fc.property(ipamObject, (raw) => {
        let config;
        try {
          config = parseIpamConfig(JSON.parse(JSON.stringify(raw)));
        } catch {
          return;
        }
        parsed++;
        assert.ok(config.ranges.length > 0);
        for (const range of config.ranges) {
          assert.ok(range.first <= range.last);
          assert.ok(inSubnet(range, { family: range.family, value: range.first }));
          assert.ok(inSubnet(range, { family: range.family, value: range.last }));
          if (range.gateway !== undefined) {
            assert.equal(range.gateway.family, range.family, formatIP(range.gateway));
            const excluded = range.excluded.some(
              ([a, b]) => range.gateway !== undefined && range.gateway.value >= a && range.gateway.value <= b,
            );
            if (inSubnet(range, range.gateway)) assert.ok(excluded, `gateway ${formatIP(range.gateway)} is excluded`);
          }
          assert.ok(capacityOf(range) >= 0n);
          const key = parsePoolKey(range.pool);
          assert.deepEqual(key, {
            family: range.family,
            network: range.network,
            prefixLength: range.prefixLength,
            networkName: config.networkName,
            ...(raw.enable_overlapping_ranges === false ? { isolated: true } : {}),
          });
        }
        config.ranges.forEach((a, i) =>
          config.ranges
            .slice(i + 1)
            .forEach((b) => assert.ok(!subnetsOverlap(a, b), `${a.subnet} and ${b.subnet} overlap`)),
        );
      }),
      { numRuns: 500 },
    );
    // The generator is meant to reach the success path, not only the refusals.
    assert.ok(parsed > 0, 'no generated config parsed');
  });
});

describe('parseIpamConfig on whereabouts configs with random values', () => {
  const whereaboutsKeys = [
    'range',
    'range_start',
    'range_end',
    'exclude',
    'gateway',
    'routes',
    'dns',
    'ipRanges',
    'network_name',
    'enable_l3',
    'enable_overlapping_ranges',
    'exclude_gateway',
    'addresses',
    'datastore',
    'etcd_host',
    'etcd_username',
    'etcd_password',
    'etcd_key_file',
    'etcd_cert_file',
    'etcd_ca_cert_file',
    'kubernetes',
    'configuration_path',
    'leader_lease_duration',
    'leader_renew_deadline',
    'leader_retry_period',
    'optimistic_ipam',
    'reconciler_cron_expression',
    'sleep_for_race',
    'node_slice_size',
    'log_file',
    'log_level',
  ];
  const SECRET = 'pa55-w0rd-never-shown';
  const value = fc.oneof(
    fc.jsonValue({ maxDepth: 2 }),
    fc.constantFrom(
      '10.0.0.0/24',
      '10.0.0.5/24',
      '192.168.2.225/28',
      'fd00::/64',
      '10.0.0.1',
      '',
      '/28',
      'kubernetes',
      SECRET,
    ),
    fc.constantFrom(true, false, null, 0, 1500, -1, 1.5),
    fc.constant({ kubeconfig: '/k' }),
    fc.constant([{ range: '10.0.0.0/24' }, { range: 'fd00::/64' }]),
  );
  const config = fc
    .dictionary(fc.constantFrom(...whereaboutsKeys), value, { maxKeys: 8 })
    .chain((object) =>
      fc
        .record(
          { etcd_password: fc.oneof(fc.constant(SECRET), fc.constant(7), fc.constant([SECRET])) },
          { requiredKeys: [] },
        )
        .map((extra) => ({ type: 'whereabouts', ...object, ...extra })),
    );

  test('either parse, reporting only keys that were given, or are refused with INVALID_CONFIG that never shows the etcd password', () => {
    fc.assert(
      fc.property(config, (raw) => {
        let parsed;
        try {
          parsed = parseIpamConfig(JSON.parse(JSON.stringify(raw)));
        } catch (error) {
          assert.ok(error instanceof WarrenError, `threw a non-WarrenError: ${String(error)}`);
          assert.equal(error.code, 'INVALID_CONFIG');
          assert.match(error.message, /^ipam(\.|\[|:)/);
          if (error.message.startsWith('ipam.etcd_password')) assert.ok(!error.message.includes(SECRET), error.message);
          return;
        }
        for (const { path, reason } of parsed.ignoredKeys) {
          assert.ok(path.slice('ipam.'.length) in raw, `${path} was reported but not given`);
          assert.ok(reason.length > 0);
        }
        assert.equal(
          new Set(parsed.ignoredKeys.map((k) => k.path)).size,
          parsed.ignoredKeys.length,
          'each key reported once',
        );
      }),
      { numRuns: 1000 },
    );
  });
});
