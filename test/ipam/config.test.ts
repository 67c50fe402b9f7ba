/**
 * parseIpamConfig: every key whereabouts users write is accepted, every problem is an
 * INVALID_CONFIG error whose message starts with the path of the offending key, and no input at
 * all makes it throw anything else. capacityOf counts each unusable address once.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { WarrenError } from '../../src/core/errors.ts';
import { formatIP, parseIP } from '../../src/ipam/address.ts';
import { type RangeSpec, capacityOf, inSubnet, parseIpamConfig } from '../../src/ipam/config.ts';

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
      routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }, { dst: '192.168.0.0/16' }, { dst: 'FD00:0::/8', gw: 'fd00::0001' }],
    });
    assert.deepEqual(config.routes, [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }, { dst: '192.168.0.0/16' }, { dst: 'fd00::/8', gw: 'fd00::1' }]);
  });

  test('dns with every field, nameservers canonicalised', () => {
    const config = parseIpamConfig({
      ...base,
      dns: { nameservers: ['10.0.0.53', '2001:DB8:0::1'], domain: 'cluster.local', search: ['svc.cluster.local'], options: ['ndots:5'] },
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
        { range: '10.0.0.0/24', range_start: '10.0.0.100', range_end: '10.0.0.110', exclude: ['10.0.0.105'], gateway: '10.0.0.1' },
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
    const config = parseIpamConfig({ type: 'warren', gateway: 'fd00::1', ipRanges: [{ range: '10.0.0.0/24' }, { range: 'fd00::/64' }] });
    const [v4, v6] = config.ranges as [RangeSpec, RangeSpec];
    assert.equal(v4.gateway, undefined);
    assert.equal(v6.gateway?.value, ip('fd00::1'));
  });

  test('a top-level gateway repeated as the gateway of an ipRanges entry', () => {
    // Regression: the check that the top-level gateway lies in some range compared objects, so
    // the same address written again on the entry was reported as "not inside any range".
    const config = parseIpamConfig({ type: 'warren', gateway: '10.0.0.1', ipRanges: [{ range: '10.0.0.0/24', gateway: '10.0.0.1' }] });
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

  test('the whereabouts keys that change nothing, and Warren’s socket and cooldown', () => {
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
  });

  test('a custom path prefix for messages', () => {
    assert.throws(() => parseIpamConfig({ type: 'warren' }, 'plugins[0].ipam'), { code: 'INVALID_CONFIG', message: /^plugins\[0\]\.ipam: / });
  });
});

describe('parseIpamConfig refuses', () => {
  test('a value that is not an object', () => {
    for (const value of [null, undefined, 'x', 1, true, [], [base]]) rejects(value, 'ipam');
  });

  test('unknown keys, naming them, at every level', () => {
    rejects({ ...base, bogus: 1 }, 'ipam.bogus', /unknown key/);
    rejects({ ...base, Range: '10.0.0.0/24' }, 'ipam.Range', /unknown key/);
    rejects({ type: 'warren', ipRanges: [{ range: '10.0.0.0/24' }, { range: 'fd00::/64', routes: [] }] }, 'ipam.ipRanges[1].routes', /unknown key/);
    rejects({ ...base, routes: [{ dst: '0.0.0.0/0', via: '10.0.0.1' }] }, 'ipam.routes[0].via', /unknown key/);
    rejects({ ...base, dns: { nameserver: ['10.0.0.53'] } }, 'ipam.dns.nameserver', /unknown key/);
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
    rejects({ ...base, routes: [{ dst: '10.0.0.1/24' }] }, 'ipam.routes[0].dst');
    rejects({ ...base, routes: [{ dst: '0.0.0.0/0', gw: 'fd00::1' }] }, 'ipam.routes[0].gw');
    rejects({ ...base, dns: { nameservers: ['10.0.0.53', 'dns.example'] } }, 'ipam.dns.nameservers[1]');
    rejects({ ...base, network_name: 'a b' }, 'ipam.network_name');
    rejects({ ...base, network_name: 'a/b' }, 'ipam.network_name');
    rejects({ ...base, network_name: 'a@b' }, 'ipam.network_name');
    rejects({ ...base, network_name: 'n'.repeat(254) }, 'ipam.network_name');
    rejects({ ...base, socket: 'run/warren.sock' }, 'ipam.socket', /absolute/);
    for (const c of [-1, 1.5, 86_401, Number.MAX_SAFE_INTEGER]) rejects({ ...base, cooldown_seconds: c }, 'ipam.cooldown_seconds');
    for (const b of [7, 33, 26.5, '26', null]) rejects({ ...base, range: '10.0.0.0/8', block_size: b }, 'ipam.block_size', /prefix length from 8/);
    rejects({ type: 'warren', ipRanges: [{ range: 'fd00::/64', block_size: 26 }] }, 'ipam.ipRanges[0].block_size', /from 64 .* to 128/);
    rejects({ ...base, store: 'redis' }, 'ipam.store', /"sqlite" or "etcd"/);
  });

  test('block sizes: defaults per family, never shorter than the range, per range or shared', () => {
    const one = parseIpamConfig({ type: 'warren', ipRanges: [{ range: '10.0.0.0/16' }, { range: 'fd00::/64' }, { range: '10.1.0.0/28' }] });
    assert.deepEqual(one.ranges.map((r) => r.blockPrefix), [26, 122, 28]);
    const shared = parseIpamConfig({ type: 'warren', block_size: 24, ipRanges: [{ range: '10.0.0.0/16' }, { range: '10.2.0.0/16', block_size: 30 }] });
    assert.deepEqual(shared.ranges.map((r) => r.blockPrefix), [24, 30]);
    assert.equal(parseIpamConfig({ type: 'warren', range: '10.0.0.0/16', store: 'etcd' }).store, 'etcd');
  });

  test('a range that is not a network, suggesting the network', () => {
    rejects({ ...base, range: '10.0.0.5/24' }, 'ipam.range', /not a network.*10\.0\.0\.0\/24/);
    rejects({ type: 'warren', ipRanges: [{ range: '10.0.0.0/24' }, { range: 'fd00::1/64' }] }, 'ipam.ipRanges[1].range', /fd00::\/64/);
  });

  test('range_start or range_end outside the range', () => {
    rejects({ ...base, range_start: '10.0.1.1' }, 'ipam.range_start', /outside/);
    rejects({ ...base, range_end: '10.0.1.1' }, 'ipam.range_end', /outside/);
    rejects({ ...base, range_start: 'fd00::1' }, 'ipam.range_start', /outside/);
    rejects({ type: 'warren', ipRanges: [{ range: 'fd00::/64', range_end: 'fd00:0:0:1::' }] }, 'ipam.ipRanges[0].range_end', /outside/);
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
    rejects({ type: 'warren', range: '10.0.0.5-10.0.0.9/24', range_start: '10.0.0.6' }, 'ipam.range', /cannot be combined/);
  });

  test('a span with no allocatable address', () => {
    rejects({ ...base, range_start: '10.0.0.255' }, 'ipam.range', /no allocatable/);
  });

  test('range keys without a range', () => {
    rejects({ type: 'warren', range_start: '10.0.0.1', ipRanges: [{ range: '10.0.0.0/24' }] }, 'ipam.range_start', /needs "range"/);
    rejects({ type: 'warren', range_end: '10.0.0.1' }, 'ipam.range_end');
    rejects({ type: 'warren', exclude: [] }, 'ipam.exclude');
  });

  test('an exclusion of the other family', () => {
    rejects({ ...base, exclude: ['fd00::/64'] }, 'ipam.exclude[0]', /IPv6 exclusion in IPv4/);
    rejects({ type: 'warren', ipRanges: [{ range: 'fd00::/64', exclude: ['fd00::1', '10.0.0.0/8'] }] }, 'ipam.ipRanges[0].exclude[1]');
  });

  test('an exclusion that is not a network', () => {
    rejects({ ...base, exclude: ['10.0.0.5/28'] }, 'ipam.exclude[0]', /not a network/);
  });

  test('a gateway outside every range', () => {
    rejects({ ...base, gateway: '10.0.1.1' }, 'ipam.gateway', /not inside any range/);
    rejects({ type: 'warren', gateway: '192.168.0.1', ipRanges: [{ range: '10.0.0.0/24' }, { range: 'fd00::/64' }] }, 'ipam.gateway');
    rejects({ type: 'warren', ipRanges: [{ range: '10.0.0.0/24', gateway: '10.0.1.1' }] }, 'ipam.ipRanges[0].gateway', /outside/);
  });

  test('the same range twice', () => {
    rejects({ ...base, ipRanges: [{ range: '10.0.0.0/24' }] }, 'ipam', /listed twice/);
    rejects({ type: 'warren', ipRanges: [{ range: 'fd00::/64' }, { range: 'fd00:0::/64', range_start: 'fd00::9' }] }, 'ipam', /listed twice/);
  });

  test('no range at all', () => {
    rejects({ type: 'warren' }, 'ipam', /needs "range"/);
    rejects({ type: 'warren', ipRanges: [] }, 'ipam', /needs "range"/);
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
    assert.equal(capacity({ range: '10.0.0.0/24', gateway: '10.0.0.1', exclude: ['10.0.0.0/28', '10.0.0.2', '10.0.0.0/30', '10.0.0.8/29'] }), 254n - 15n);
  });

  test('exclusions of the network and broadcast addresses change nothing', () => {
    assert.equal(capacity({ range: '10.0.0.0/24', exclude: ['10.0.0.0/32', '10.0.0.255/32'] }), 254n);
    assert.equal(capacity({ range: '10.0.0.0/24', exclude: ['10.0.0.0/16'] }), 0n);
  });

  test('exclusions outside range_start and range_end change nothing', () => {
    assert.equal(capacity({ range: '10.0.0.0/24', range_start: '10.0.0.10', range_end: '10.0.0.19', exclude: ['10.0.0.0/29', '10.0.0.18/31'] }), 8n);
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
  const mostly = <T,>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
    fc.oneof({ arbitrary: valid, weight: 20 }, { arbitrary: anyValue, weight: 1 });
  const ipText = fc.oneof(
    fc.constantFrom('10.0.0.1', '10.0.0.0', '10.0.0.255', '10.0.1.1', 'fd00::1', 'fd00::', '::', '1.2.3', 'x', ''),
    fc.nat(255).map((b) => `10.0.0.${b}`),
    fc.nat(255).map((b) => `fd00::${b.toString(16)}`),
  );
  const cidrText = fc.oneof(
    fc.constantFrom('10.0.0.0/24', '10.0.0.0/31', '10.0.0.5/24', 'fd00::/64', 'fd00::/120', '10.0.0.5-10.0.0.9/24', '10.0.0.0/33', '0.0.0.0/0'),
    fc.tuple(ipText, fc.integer({ min: 0, max: 130 })).map(([a, len]) => `${a}/${len}`),
  );
  const networkText = fc.oneof(
    fc.constantFrom('10.0.0.0/24', '10.0.0.0/28', '10.0.0.0/31', '10.0.0.7/32', 'fd00::/64', 'fd00::/120', 'fd00::/127', '10.0.0.5-10.0.0.9/24'),
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
    routes: mostly(fc.array(fc.record({ dst: mostly(networkText), gw: mostly(ipText) }, { requiredKeys: ['dst'] }), { maxLength: 2 })),
    dns: mostly(
      fc.record(
        { nameservers: mostly(fc.array(ipText, { maxLength: 2 })), domain: mostly(fc.string()), search: mostly(fc.array(fc.string(), { maxLength: 2 })), options: anyValue },
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
    bogus: fc.constant(1),
  };
  /** A random subset of the known keys (and, rarely, an unknown one), each with a random value. */
  const ipamObject = fc
    .tuple(fc.record(ipamValues), fc.subarray(Object.keys(ipamValues).filter((k) => k !== 'bogus' && k !== 'type')), fc.integer({ min: 0, max: 19 }))
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

  test('whatever parses has ranges whose span and gateway lie inside their subnet', () => {
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
          if (range.gateway !== undefined) assert.ok(inSubnet(range, range.gateway), formatIP(range.gateway));
          assert.ok(capacityOf(range) >= 0n);
        }
      }),
      { numRuns: 500 },
    );
    // The generator is meant to reach the success path, not only the refusals.
    assert.ok(parsed > 0, 'no generated config parsed');
  });
});
