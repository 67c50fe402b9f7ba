/**
 * deriveConfig: Warren's conflist derived from a node's primary CNI config. host-local keys become
 * whereabouts-style keys with the implicit gateway made explicit, whereabouts keys are kept with
 * the whereabouts-only ones dropped and noted, every plugin but the main one's IPAM is kept as
 * written, cniVersion is capped, and whatever cannot be translated is refused in one sentence
 * that names the file and the offending key. Whatever the input, deriveConfig answers (never
 * throws), and whatever it writes the agent accepts at ADD. isConfigName: what a conf dir holds.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { WarrenError } from '../../src/core/errors.ts';
import {
  type Derivation,
  DEFAULT_OUTPUT_NAME,
  GENERATED_MARKER,
  deriveConfig,
  isConfigName,
  isGeneratedConfig,
} from '../../src/cni/derived-config.ts';
import { translateIpam } from '../../src/cni/host-local-keys.ts';
import { parseNetConf } from '../../src/cni/netconf.ts';
import {
  type CniVersion,
  SPEC_VERSION,
  SUPPORTED_VERSIONS,
  compareVersions,
  isSupportedVersion,
} from '../../src/cni/spec.ts';

type Json = Record<string, unknown>;
type Derived = Extract<Derivation, { ok: true }>;

const LIST = '10-bridge.conflist';

function derive(
  primaryName: string,
  primary: unknown,
  cniVersionMax: CniVersion = '1.1.0',
  extra: { socket?: string; journalDir?: string } = {},
): Derivation {
  const primaryText = typeof primary === 'string' ? primary : JSON.stringify(primary, null, 2);
  return deriveConfig({ primaryName, primaryText, cniVersionMax, ...extra });
}

/** Asserts the derivation succeeded and returns it with its text parsed. */
function derived(result: Derivation): Derived & { out: Json } {
  if (!result.ok) assert.fail(`refused: ${result.reason}`);
  const out: unknown = JSON.parse(result.text);
  assert.ok(typeof out === 'object' && out !== null && !Array.isArray(out), 'the text is a JSON object');
  return { ...result, out: out as Json };
}

function pluginsOf(out: Json): Json[] {
  assert.ok(Array.isArray(out.plugins), 'the output has a plugins list');
  return out.plugins as Json[];
}

/** The output's main plugin: the first with an ipam section. */
function mainOf(out: Json): Json {
  const main = pluginsOf(out).find((p) => p.ipam !== undefined);
  assert.ok(main !== undefined, 'the output has a plugin with an ipam section');
  return main;
}

/** Asserts a refusal whose reason starts with the file's name and names every `mentions`. */
function refused(
  primaryName: string,
  primary: unknown,
  mentions: readonly (string | RegExp)[],
  cniVersionMax: CniVersion = '1.1.0',
): string {
  const result = derive(primaryName, primary, cniVersionMax);
  if (result.ok) assert.fail(`derived, expected a refusal:\n${result.text}`);
  assert.ok(
    result.reason.startsWith(`${primaryName}: `),
    `reason "${result.reason}" should start with "${primaryName}: "`,
  );
  for (const m of mentions) {
    if (typeof m === 'string') assert.ok(result.reason.includes(m), `reason "${result.reason}" should name ${m}`);
    else assert.match(result.reason, m);
  }
  return result.reason;
}

const BRIDGE = { type: 'bridge', bridge: 'cni0', isGateway: true, ipMasq: true, hairpinMode: true, mtu: 1450 };
const PORTMAP = { type: 'portmap', capabilities: { portMappings: true }, snat: true };
const TUNING = { type: 'tuning', sysctl: { 'net.core.somaxconn': '1024' } };

/** The usual bridge + host-local conflist, with the host-local keys given. */
function hostLocal(ipam: Json, cniVersion = '1.0.0'): Json {
  return { cniVersion, name: 'cbr0', plugins: [{ ...BRIDGE, ipam: { type: 'host-local', ...ipam } }, PORTMAP, TUNING] };
}

describe('deriveConfig translates host-local', () => {
  const table: { what: string; ipam: Json; expected: Json; notes?: RegExp[] }[] = [
    {
      what: 'a legacy subnet alone, with its implicit gateway made explicit',
      ipam: { subnet: '10.22.0.0/16' },
      expected: { type: 'warren', ipRanges: [{ range: '10.22.0.0/16', gateway: '10.22.0.1' }] },
    },
    {
      what: 'a legacy subnet with rangeStart, rangeEnd and gateway',
      ipam: { subnet: '10.22.0.0/16', rangeStart: '10.22.1.10', rangeEnd: '10.22.1.200', gateway: '10.22.0.254' },
      expected: {
        type: 'warren',
        ipRanges: [
          { range: '10.22.0.0/16', range_start: '10.22.1.10', range_end: '10.22.1.200', gateway: '10.22.0.254' },
        ],
      },
    },
    {
      what: 'a legacy subnet with rangeStart only',
      ipam: { subnet: '192.168.10.0/24', rangeStart: '192.168.10.100' },
      expected: {
        type: 'warren',
        ipRanges: [{ range: '192.168.10.0/24', range_start: '192.168.10.100', gateway: '192.168.10.1' }],
      },
    },
    {
      what: 'a legacy subnet with rangeEnd and gateway, no rangeStart',
      ipam: { subnet: '192.168.10.0/24', rangeEnd: '192.168.10.99', gateway: '192.168.10.254' },
      expected: {
        type: 'warren',
        ipRanges: [{ range: '192.168.10.0/24', range_end: '192.168.10.99', gateway: '192.168.10.254' }],
      },
    },
    {
      what: 'a legacy IPv6 subnet, written in upper case, canonicalised',
      ipam: { subnet: 'FD00:10:0::/64', rangeStart: 'FD00:10::0A' },
      expected: {
        type: 'warren',
        ipRanges: [{ range: 'fd00:10::/64', range_start: 'fd00:10::a', gateway: 'fd00:10::1' }],
      },
    },
    {
      what: 'the smallest subnets host-local accepts (/30 and /126)',
      ipam: { subnet: '10.9.0.4/30', ranges: [[{ subnet: 'fd00:9::/126' }]] },
      expected: {
        type: 'warren',
        ipRanges: [
          { range: '10.9.0.4/30', gateway: '10.9.0.5' },
          { range: 'fd00:9::/126', gateway: 'fd00:9::1' },
        ],
      },
    },
    {
      what: 'ranges with an IPv4 and an IPv6 set, one range each',
      ipam: {
        ranges: [
          [{ subnet: '10.1.0.0/24', gateway: '10.1.0.254' }],
          [{ subnet: 'fd00:1::/64', rangeStart: 'fd00:1::100', rangeEnd: 'fd00:1::1ff' }],
        ],
      },
      expected: {
        type: 'warren',
        ipRanges: [
          { range: '10.1.0.0/24', gateway: '10.1.0.254' },
          { range: 'fd00:1::/64', range_start: 'fd00:1::100', range_end: 'fd00:1::1ff', gateway: 'fd00:1::1' },
        ],
      },
    },
    {
      what: 'both subnet and ranges, the legacy range first as host-local orders them',
      ipam: {
        ranges: [[{ subnet: 'fd00:2::/64' }], [{ subnet: '10.3.0.0/24' }]],
        subnet: '10.2.0.0/24',
        rangeStart: '10.2.0.50',
      },
      expected: {
        type: 'warren',
        ipRanges: [
          { range: '10.2.0.0/24', range_start: '10.2.0.50', gateway: '10.2.0.1' },
          { range: 'fd00:2::/64', gateway: 'fd00:2::1' },
          { range: '10.3.0.0/24', gateway: '10.3.0.1' },
        ],
      },
    },
    {
      what: 'routes, kept as written',
      ipam: {
        subnet: '10.22.0.0/16',
        routes: [{ dst: '0.0.0.0/0' }, { dst: '192.168.0.0/16', gw: '10.22.0.1' }, { dst: 'FD00::/8' }],
      },
      expected: {
        type: 'warren',
        ipRanges: [{ range: '10.22.0.0/16', gateway: '10.22.0.1' }],
        routes: [{ dst: '0.0.0.0/0' }, { dst: '192.168.0.0/16', gw: '10.22.0.1' }, { dst: 'FD00::/8' }],
      },
    },
    {
      what: 'dataDir, dropped with a note',
      ipam: { subnet: '10.22.0.0/16', dataDir: '/var/lib/cni/networks' },
      expected: { type: 'warren', ipRanges: [{ range: '10.22.0.0/16', gateway: '10.22.0.1' }] },
      notes: [/^plugins\[0\]\.ipam\.dataDir dropped: /],
    },
  ];

  for (const { what, ipam, expected, notes = [] } of table) {
    test(`${what}`, () => {
      const primary = hostLocal(ipam);
      const result = derived(derive(LIST, primary));
      const [bridge, portmap, tuning, ...rest] = pluginsOf(result.out);
      assert.deepEqual(rest, []);
      assert.deepEqual(bridge?.ipam, expected);
      // Every other key of the main plugin, and every other plugin, exactly as the primary has them.
      const { ipam: _ipam, ...bridgeRest } = bridge as Json;
      assert.deepEqual(bridgeRest, BRIDGE);
      assert.deepEqual(portmap, PORTMAP);
      assert.deepEqual(tuning, TUNING);
      assert.equal(result.mainPlugin, 'bridge');
      assert.equal(result.network, 'cbr0');
      assert.equal(notes.length, result.notes.length, `notes: ${JSON.stringify(result.notes)}`);
      notes.forEach((note, i) => assert.match(result.notes[i] ?? '', note));
    });
  }

  test("the output is cniVersion, name, the primary's other top-level keys, plugins and the marker, in that order", () => {
    const primary = {
      name: 'cbr0',
      disableCheck: true,
      cniVersion: '1.0.0',
      plugins: [{ ...BRIDGE, ipam: { type: 'host-local', subnet: '10.22.0.0/16' } }],
      custom: { a: [1, 2] },
    };
    const { out } = derived(derive(LIST, primary));
    assert.deepEqual(Object.keys(out), ['cniVersion', 'name', 'disableCheck', 'custom', 'plugins', GENERATED_MARKER]);
    assert.equal(out.disableCheck, true);
    assert.deepEqual(out.custom, { a: [1, 2] });
  });

  test('socket and journalDir are written into the ipam section as socket and journal_dir', () => {
    const { out } = derived(
      derive(LIST, hostLocal({ subnet: '10.22.0.0/16' }), '1.1.0', {
        socket: '/run/warren/agent.sock',
        journalDir: '/var/lib/warren/journal',
      }),
    );
    assert.deepEqual(mainOf(out).ipam, {
      type: 'warren',
      ipRanges: [{ range: '10.22.0.0/16', gateway: '10.22.0.1' }],
      socket: '/run/warren/agent.sock',
      journal_dir: '/var/lib/warren/journal',
    });
    // Without them, neither key appears.
    const plain = mainOf(derived(derive(LIST, hostLocal({ subnet: '10.22.0.0/16' }))).out).ipam as Json;
    assert.ok(!('socket' in plain) && !('journal_dir' in plain));
  });

  test('a socket given to the agent replaces the one a warren primary names', () => {
    const primary = {
      cniVersion: '1.0.0',
      name: 'n',
      plugins: [{ type: 'ptp', ipam: { type: 'warren', range: '10.0.0.0/24', socket: '/old.sock' } }],
    };
    assert.deepEqual(mainOf(derived(derive(LIST, primary, '1.1.0', { socket: '/new.sock' })).out).ipam, {
      type: 'warren',
      range: '10.0.0.0/24',
      socket: '/new.sock',
    });
  });

  test('a .conf primary is read as one plugin and written as a list of it, without its name and cniVersion', () => {
    const primary = {
      cniVersion: '0.4.0',
      name: 'mynet',
      type: 'bridge',
      bridge: 'cni0',
      isGateway: true,
      ipam: { type: 'host-local', subnet: '10.88.0.0/16', routes: [{ dst: '0.0.0.0/0' }] },
    };
    for (const file of ['10-mynet.conf', '10-mynet.json']) {
      const result = derived(derive(file, primary));
      assert.equal(result.out.cniVersion, '0.4.0');
      assert.equal(result.out.name, 'mynet');
      assert.deepEqual(pluginsOf(result.out), [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipam: {
            type: 'warren',
            ipRanges: [{ range: '10.88.0.0/16', gateway: '10.88.0.1' }],
            routes: [{ dst: '0.0.0.0/0' }],
          },
        },
      ]);
      assert.deepEqual(Object.keys(result.out), ['cniVersion', 'name', 'plugins', GENERATED_MARKER]);
      assert.equal((result.out[GENERATED_MARKER] as Json).from, file);
    }
  });

  test('the main plugin is the first with an ipam section, wherever it sits; a later one with ipam is left alone', () => {
    const later = { type: 'sbr', ipam: { type: 'host-local', subnet: '10.7.0.0/24' } };
    const primary = {
      cniVersion: '1.0.0',
      name: 'n',
      plugins: [TUNING, { type: 'ptp', ipam: { type: 'host-local', subnet: '10.6.0.0/24', dataDir: '/d' } }, later],
    };
    const result = derived(derive(LIST, primary));
    const plugins = pluginsOf(result.out);
    assert.deepEqual(plugins[0], TUNING);
    assert.deepEqual(plugins[1], {
      type: 'ptp',
      ipam: { type: 'warren', ipRanges: [{ range: '10.6.0.0/24', gateway: '10.6.0.1' }] },
    });
    assert.deepEqual(plugins[2], later);
    assert.equal(result.mainPlugin, 'ptp');
    assert.equal(result.notes.length, 1);
    assert.match(result.notes[0] ?? '', /^plugins\[1\]\.ipam\.dataDir dropped/);
  });
});

describe('translateIpam', () => {
  function translateRefuses(ipam: unknown, path: string): void {
    assert.throws(
      () => translateIpam(ipam, 'plugins[0].ipam'),
      (error: unknown) => {
        assert.ok(error instanceof WarrenError, `expected a WarrenError, got ${String(error)}`);
        assert.equal(error.code, 'INVALID_CONFIG');
        assert.ok(error.message.startsWith(`${path}: `), `message "${error.message}" should start with "${path}: "`);
        return true;
      },
    );
  }

  test('refuses with INVALID_CONFIG whose message starts with the offending path', () => {
    translateRefuses('host-local', 'plugins[0].ipam');
    translateRefuses({ subnet: '10.0.0.0/24' }, 'plugins[0].ipam.type');
    translateRefuses({ type: 'host-local' }, 'plugins[0].ipam');
    translateRefuses({ type: 'host-local', rangeStart: '10.0.0.5' }, 'plugins[0].ipam.rangeStart');
    translateRefuses({ type: 'host-local', subnet: '10.0.0.0/24', dataDir: 7 }, 'plugins[0].ipam.dataDir');
    translateRefuses({ type: 'host-local', ranges: {} }, 'plugins[0].ipam.ranges');
    translateRefuses({ type: 'host-local', ranges: [{ subnet: '10.0.0.0/24' }] }, 'plugins[0].ipam.ranges[0]');
    translateRefuses({ type: 'host-local', ranges: [['10.0.0.0/24']] }, 'plugins[0].ipam.ranges[0][0]');
    translateRefuses(
      { type: 'host-local', ranges: [[{ subnet: '10.0.0.0/24', dataDir: '/d' }]] },
      'plugins[0].ipam.ranges[0][0].dataDir',
    );
    translateRefuses({ type: 'host-local', subnet: 'banana' }, 'plugins[0].ipam.subnet');
    translateRefuses({ type: 'host-local', subnet: '10.0.0.0/24', gateway: 'x' }, 'plugins[0].ipam.gateway');
    translateRefuses(
      { type: 'host-local', ranges: [[{ subnet: '10.0.0.0/32' }]] },
      'plugins[0].ipam.ranges[0][0].subnet',
    );
  });

  test('keeps a whereabouts section, type renamed, whereabouts-only keys dropped in the order written', () => {
    const { ipam, notes } = translateIpam(
      { log_level: 'debug', type: 'whereabouts', range: '10.0.0.0/24', datastore: 'kubernetes', enable_l3: true },
      'ipam',
    );
    assert.deepEqual(ipam, { type: 'warren', range: '10.0.0.0/24', enable_l3: true });
    assert.deepEqual(
      notes.map((n) => n.split(':')[0]),
      ['ipam.log_level dropped', 'ipam.datastore dropped'],
    );
  });
});

describe('deriveConfig refuses', () => {
  const good = hostLocal({ subnet: '10.22.0.0/16' });

  test('text that is not JSON', () => {
    refused(LIST, '{"cniVersion": "1.0.0", ', ['not valid JSON']);
    refused(LIST, 'cniVersion: 1.0.0', ['not valid JSON']);
  });

  test('an empty file', () => {
    refused(LIST, '', ['is empty']);
    refused(LIST, ' \n\t\n', ['is empty']);
  });

  test('JSON that is not an object', () => {
    for (const text of ['[]', '"cbr0"', '42', 'null', 'true', JSON.stringify([good])])
      refused(LIST, text, ['not a JSON object']);
  });

  test('a config without a network name', () => {
    const { name: _n, ...noName } = good;
    refused(LIST, noName, ['has no network name']);
  });

  test('a network name that CNI does not allow, quoting it', () => {
    for (const name of ['', 'has space', '-dash', 'a/b'])
      refused(LIST, { ...good, name }, [`"${name}"`, 'not a valid CNI network name']);
    refused(LIST, { ...good, name: 7 }, ['"7"', 'network name']);
    refused(LIST, { ...good, name: { toString: 1 } }, ['network name']);
  });

  test('a missing or malformed cniVersion', () => {
    const { cniVersion: _v, ...noVersion } = good;
    refused(LIST, noVersion, ['cniVersion']);
    for (const cniVersion of [1, '1.0', 'v1.0.0', '1.0.0-rc1', '', null])
      refused(LIST, { ...good, cniVersion }, ['cniVersion']);
  });

  test('cniVersion 0.2.0 and older, naming the version', () => {
    for (const cniVersion of ['0.2.0', '0.1.0']) refused(LIST, { ...good, cniVersion }, [`cniVersion ${cniVersion}`]);
    refused(
      '10-old.conf',
      { cniVersion: '0.2.0', name: 'n', type: 'bridge', ipam: { type: 'host-local', subnet: '10.0.0.0/24' } },
      ['cniVersion 0.2.0'],
      '1.0.0',
    );
  });

  test('a .conflist without a non-empty plugins list', () => {
    const { plugins: _p, ...noPlugins } = good;
    refused(LIST, noPlugins, ['"plugins"']);
    refused(LIST, { ...good, plugins: [] }, ['"plugins"']);
    refused(LIST, { ...good, plugins: { type: 'bridge' } }, ['"plugins"']);
  });

  test('a .conf or .json without a type, even when it holds a plugins list', () => {
    refused('10-x.conf', { cniVersion: '1.0.0', name: 'n', ipam: { type: 'host-local', subnet: '10.0.0.0/24' } }, [
      '"type"',
    ]);
    refused(
      '10-x.json',
      { cniVersion: '1.0.0', name: 'n', type: '', ipam: { type: 'host-local', subnet: '10.0.0.0/24' } },
      ['"type"'],
    );
    refused('10-x.conf', good, ['"type"']);
  });

  test('a chain with a plugin that is not an object with a type', () => {
    refused(LIST, { ...good, plugins: [...(good.plugins as Json[]), 'portmap'] }, ['"type"']);
    refused(LIST, { ...good, plugins: [{ ...BRIDGE, type: 7, ipam: { type: 'host-local', subnet: '10.0.0.0/24' } }] }, [
      '"type"',
    ]);
  });

  test('a chain where no plugin has an ipam section', () => {
    refused(LIST, { ...good, plugins: [BRIDGE, PORTMAP] }, ['IPAM section']);
    refused('10-x.conf', { cniVersion: '1.0.0', name: 'n', type: 'bridge' }, ['IPAM section']);
  });

  test('IPAM plugins Warren cannot take over, naming the type and where it is', () => {
    for (const type of ['dhcp', 'calico-ipam', 'static', 'azure-vnet-ipam']) {
      refused(LIST, { ...good, plugins: [{ ...BRIDGE, ipam: { type } }, PORTMAP] }, [
        'plugins[0].ipam.type',
        `"${type}"`,
      ]);
    }
    refused('10-x.conf', { cniVersion: '0.3.1', name: 'n', type: 'macvlan', ipam: { type: 'dhcp' } }, [
      /: ipam\.type: /,
      '"dhcp"',
    ]);
  });

  test('an ipam section that is not an object, or has no type', () => {
    refused(LIST, { ...good, plugins: [{ ...BRIDGE, ipam: 'host-local' }] }, ['plugins[0].ipam']);
    refused(LIST, { ...good, plugins: [{ ...BRIDGE, ipam: null }] }, ['plugins[0].ipam']);
    refused(LIST, { ...good, plugins: [{ ...BRIDGE, ipam: { subnet: '10.0.0.0/24' } }] }, ['plugins[0].ipam.type']);
  });

  test('host-local resolvConf', () => {
    refused(LIST, hostLocal({ subnet: '10.22.0.0/16', resolvConf: '/etc/resolv.conf' }), [
      'plugins[0].ipam.resolvConf',
    ]);
  });

  test('a range set with two ranges, even of two families', () => {
    refused(LIST, hostLocal({ ranges: [[{ subnet: '10.1.0.0/24' }, { subnet: '10.2.0.0/24' }]] }), [
      'plugins[0].ipam.ranges[0]',
      '2 ranges',
    ]);
    refused(
      LIST,
      hostLocal({ ranges: [[{ subnet: '10.1.0.0/24' }], [{ subnet: '10.2.0.0/24' }, { subnet: 'fd00::/64' }]] }),
      ['plugins[0].ipam.ranges[1]', '2 ranges'],
    );
  });

  test('an empty range set', () => {
    refused(LIST, hostLocal({ ranges: [[{ subnet: '10.1.0.0/24' }], []] }), [
      'plugins[0].ipam.ranges[1]',
      'empty range set',
    ]);
  });

  test('an unknown host-local key, with a hint at the one meant', () => {
    refused(LIST, hostLocal({ subnet: '10.22.0.0/16', rangestart: '10.22.0.10' }), [
      'plugins[0].ipam.rangestart',
      '"rangeStart"',
    ]);
    refused(LIST, hostLocal({ ranges: [[{ subnet: '10.1.0.0/24', rangeend: '10.1.0.9' }]] }), [
      'plugins[0].ipam.ranges[0][0].rangeend',
    ]);
  });

  test('host-local rangeStart, rangeEnd or gateway without a subnet beside them', () => {
    refused(LIST, hostLocal({ rangeStart: '10.1.0.5', ranges: [[{ subnet: '10.1.0.0/24' }]] }), [
      'plugins[0].ipam.rangeStart',
      '"subnet"',
    ]);
    refused(LIST, hostLocal({ gateway: '10.1.0.1', ranges: [[{ subnet: '10.1.0.0/24' }]] }), [
      'plugins[0].ipam.gateway',
    ]);
  });

  test('a subnet smaller than /30 or /126, legacy or in a range set', () => {
    refused(LIST, hostLocal({ subnet: '10.0.0.0/31' }), ['plugins[0].ipam.subnet', '10.0.0.0/31', 'too small']);
    refused(LIST, hostLocal({ subnet: '10.0.0.7/32' }), ['plugins[0].ipam.subnet', '10.0.0.7/32']);
    refused(LIST, hostLocal({ ranges: [[{ subnet: 'fd00::/127' }]] }), [
      'plugins[0].ipam.ranges[0][0].subnet',
      'fd00::/127',
    ]);
    refused(LIST, hostLocal({ ranges: [[{ subnet: 'fd00::1/128' }]] }), ['plugins[0].ipam.ranges[0][0].subnet']);
  });

  test("host-local keys outside the subnet, or a subnet with host bits, refused in host-local's own words", () => {
    refused(LIST, hostLocal({ subnet: '10.22.0.0/16', rangeStart: '10.23.0.5' }), [
      'plugins[0].ipam.rangeStart',
      '10.23.0.5 is outside 10.22.0.0/16',
    ]);
    refused(LIST, hostLocal({ subnet: '10.22.0.0/16', gateway: '10.9.9.9' }), ['plugins[0].ipam.gateway', 'outside']);
    refused(LIST, hostLocal({ subnet: '10.0.0.5/24' }), ['plugins[0].ipam.subnet', 'host bits', '10.0.0.0/24']);
  });

  test('host-local ranges the ADD parser refuses', () => {
    refused(LIST, hostLocal({ subnet: '10.22.0.0/16', rangeStart: '10.22.0.200', rangeEnd: '10.22.0.100' }), [
      'would be refused at ADD',
    ]);
    refused(LIST, hostLocal({ subnet: '10.22.0.0/16', gateway: 'fd00::1' }), ['plugins[0].ipam.gateway', 'outside']);
    refused(LIST, hostLocal({ subnet: '10.22.0.0/16', routes: [{ dst: '0.0.0.0/0', mtu: 1400 }] }), [
      'would be refused at ADD',
      'routes[0].mtu',
    ]);
  });

  test('overlapping ranges, which the ADD parser refuses', () => {
    refused(LIST, hostLocal({ subnet: '10.0.0.0/24', ranges: [[{ subnet: '10.0.0.0/25' }]] }), [
      'would be refused at ADD',
      'overlaps',
    ]);
  });

  test("Warren's own output as a primary; isGeneratedConfig tells the two apart", () => {
    const primaryText = JSON.stringify(good, null, 2);
    const first = derived(deriveConfig({ primaryName: LIST, primaryText, cniVersionMax: '1.1.0' }));
    assert.equal(isGeneratedConfig(first.text), true);
    assert.equal(isGeneratedConfig(primaryText), false);
    refused(DEFAULT_OUTPUT_NAME, first.text, ['generated by Warren']);
    // Any value under the marker counts, and the marker wins over every other problem.
    refused(LIST, { [GENERATED_MARKER]: null }, ['generated by Warren']);
    assert.equal(isGeneratedConfig(JSON.stringify({ [GENERATED_MARKER]: false })), true);
  });

  test('isGeneratedConfig is false for anything that is not an object carrying the marker', () => {
    for (const text of [
      '',
      'not json',
      '[]',
      'null',
      '"warren.generated"',
      JSON.stringify([{ [GENERATED_MARKER]: {} }]),
      JSON.stringify({ plugins: [{ [GENERATED_MARKER]: {} }] }),
    ]) {
      assert.equal(isGeneratedConfig(text), false, text);
    }
  });
});

describe('deriveConfig cniVersion', () => {
  const ipam = { type: 'host-local', subnet: '10.22.0.0/16' };

  test('a 1.1.0 primary under a 1.0.0 cap is written as 1.0.0', () => {
    const result = derived(derive(LIST, hostLocal({ subnet: '10.22.0.0/16' }, '1.1.0'), '1.0.0'));
    assert.equal(result.out.cniVersion, '1.0.0');
    assert.equal(result.cniVersion, '1.0.0');
  });

  test('a 0.3.1 primary under a 1.0.0 cap stays 0.3.1', () => {
    const result = derived(derive(LIST, hostLocal({ subnet: '10.22.0.0/16' }, '0.3.1'), '1.0.0'));
    assert.equal(result.out.cniVersion, '0.3.1');
    assert.equal(result.cniVersion, '0.3.1');
  });

  test('a 1.0.0 primary under a 1.1.0 cap stays 1.0.0', () => {
    assert.equal(
      derived(derive(LIST, hostLocal({ subnet: '10.22.0.0/16' }, '1.0.0'), '1.1.0')).out.cniVersion,
      '1.0.0',
    );
  });

  test('a version newer than any Warren speaks is capped, never above 1.1.0', () => {
    assert.equal(SPEC_VERSION, '1.1.0');
    for (const declared of ['1.2.0', '2.0.0']) {
      assert.equal(derived(derive(LIST, hostLocal({ subnet: '10.22.0.0/16' }, declared), '1.1.0')).cniVersion, '1.1.0');
      assert.equal(derived(derive(LIST, hostLocal({ subnet: '10.22.0.0/16' }, declared), '0.4.0')).cniVersion, '0.4.0');
    }
  });

  test('every supported version under every cap gives the older of the two', () => {
    for (const declared of SUPPORTED_VERSIONS) {
      for (const cap of SUPPORTED_VERSIONS) {
        const expected = compareVersions(declared, cap) > 0 ? cap : declared;
        const result = derived(derive(LIST, hostLocal({ subnet: '10.22.0.0/16' }, declared), cap));
        assert.equal(result.out.cniVersion, expected, `${declared} under ${cap}`);
      }
    }
  });

  test("a plugin's own cniVersion is rewritten to the list's, and none is added where there was none", () => {
    const primary = {
      cniVersion: '1.1.0',
      name: 'cbr0',
      plugins: [{ ...BRIDGE, cniVersion: '1.1.0', ipam }, { ...PORTMAP, cniVersion: '0.4.0' }, TUNING],
    };
    const plugins = pluginsOf(derived(derive(LIST, primary, '1.0.0')).out);
    assert.equal(plugins[0]?.cniVersion, '1.0.0');
    assert.deepEqual(plugins[1], { ...PORTMAP, cniVersion: '1.0.0' });
    assert.deepEqual(plugins[2], TUNING);
    assert.ok(!('cniVersion' in (plugins[2] as Json)));
  });
});

describe('deriveConfig on a whereabouts primary', () => {
  const whereaboutsIpam = {
    type: 'whereabouts',
    range: '192.168.2.225/28',
    range_start: '192.168.2.226',
    exclude: ['192.168.2.229/30', '192.168.2.236/32'],
    gateway: '192.168.2.225',
    routes: [{ dst: '10.0.0.0/8', gw: '192.168.2.225' }],
    etcd_host: 'example-etcd-cluster-client.cluster.svc.cluster.local:2379',
    kubernetes: { kubeconfig: '/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig' },
    log_file: '/tmp/whereabouts.log',
    log_level: 'debug',
  };
  const macvlan = { type: 'macvlan', master: 'eth1', mode: 'bridge', ipam: whereaboutsIpam };
  const kept = {
    type: 'warren',
    range: '192.168.2.225/28',
    range_start: '192.168.2.226',
    exclude: ['192.168.2.229/30', '192.168.2.236/32'],
    gateway: '192.168.2.225',
    routes: [{ dst: '10.0.0.0/8', gw: '192.168.2.225' }],
  };

  test('in a conflist: type warren, address keys kept, whereabouts-only keys dropped, each noted', () => {
    const primary = { cniVersion: '0.3.1', name: 'macvlan-conf', plugins: [macvlan, TUNING] };
    const result = derived(derive('20-macvlan.conflist', primary));
    const [main, tuning] = pluginsOf(result.out);
    assert.deepEqual(main, { type: 'macvlan', master: 'eth1', mode: 'bridge', ipam: kept });
    assert.deepEqual(tuning, TUNING);
    assert.equal(result.mainPlugin, 'macvlan');
    assert.equal(result.cniVersion, '0.3.1');
    assert.deepEqual(
      result.notes.map((n) => n.slice(0, n.indexOf(' dropped: '))),
      [
        'plugins[0].ipam.etcd_host',
        'plugins[0].ipam.kubernetes',
        'plugins[0].ipam.log_file',
        'plugins[0].ipam.log_level',
      ],
    );
    for (const note of result.notes) assert.ok(note.split(' dropped: ')[1]?.length, `note "${note}" says why`);
  });

  test('as a single-plugin .conf, as a NetworkAttachmentDefinition carries it', () => {
    const result = derived(derive('macvlan.conf', { cniVersion: '0.3.1', name: 'macvlan-conf', ...macvlan }));
    assert.deepEqual(pluginsOf(result.out), [{ type: 'macvlan', master: 'eth1', mode: 'bridge', ipam: kept }]);
    assert.deepEqual(
      result.notes.map((n) => n.slice(0, n.indexOf(' dropped: '))),
      ['ipam.etcd_host', 'ipam.kubernetes', 'ipam.log_file', 'ipam.log_level'],
    );
  });

  test('a whereabouts key Warren does not know is refused at ADD, naming it', () => {
    refused(
      '20-macvlan.conflist',
      { cniVersion: '0.3.1', name: 'm', plugins: [{ ...macvlan, ipam: { ...whereaboutsIpam, bogus_key: 1 } }] },
      ['would be refused at ADD', 'bogus_key'],
    );
  });
});

describe('deriveConfig output', () => {
  const primary = hostLocal(
    {
      ranges: [[{ subnet: '10.1.0.0/24' }], [{ subnet: 'fd00:1::/64' }]],
      routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0' }],
    },
    '1.0.0',
  );
  // As files are written: with a trailing newline, which the digest covers.
  const primaryText = `${JSON.stringify(primary, null, 2)}\n`;
  const input = { primaryName: LIST, primaryText, cniVersionMax: '1.1.0' as const, socket: '/run/warren.sock' };

  test('is byte-identical for the same input, ends with one newline and parses as JSON', () => {
    const a = derived(deriveConfig(input));
    const b = derived(deriveConfig({ ...input }));
    assert.equal(a.text, b.text);
    assert.ok(a.text.endsWith('}\n'));
    assert.ok(!a.text.endsWith('\n\n'));
    assert.deepEqual(JSON.parse(a.text), a.out);
    assert.equal(a.text, `${JSON.stringify(a.out)}\n`, 'compact: indentation would grow with depth');
  });

  test("a deeply nested primary is refused with the plugin's limit named, never a stack overflow", () => {
    const deep = (levels: number): string =>
      `{"cniVersion":"1.0.0","name":"deep","plugins":[{"type":"bridge","ipam":{"type":"host-local","subnet":"10.9.0.0/24"},"x":${'['.repeat(levels)}${']'.repeat(levels)}}]}`;
    for (const levels of [100_000, 2_000]) {
      const result = deriveConfig({ primaryName: LIST, primaryText: deep(levels), cniVersionMax: '1.1.0' });
      assert.equal(result.ok, false, `${levels} deep`);
      assert.match(
        result.ok ? '' : result.reason,
        /10-bridge\.conflist: nests arrays and objects more than 1000 levels deep, more than the plugin accepts/,
      );
    }
    // Within the limit once derived (two levels fewer in the main plugin than in the list): written compact.
    const fits = deriveConfig({ primaryName: LIST, primaryText: deep(990), cniVersionMax: '1.1.0' });
    assert.ok(fits.ok, fits.ok ? '' : fits.reason);
    assert.ok(fits.text.length < 4 * 1024, `a primary of a few KB stays a few KB (${fits.text.length} bytes)`);
  });

  test('a primary larger than the plugin reads is refused, naming the limit', () => {
    const big = JSON.stringify({
      cniVersion: '1.0.0',
      name: 'big',
      plugins: [
        { type: 'bridge', ipam: { type: 'host-local', subnet: '10.9.0.0/24' }, pad: 'x'.repeat(4 * 1024 * 1024) },
      ],
    });
    const result = deriveConfig({ primaryName: LIST, primaryText: big, cniVersionMax: '1.1.0' });
    assert.match(
      result.ok ? '' : result.reason,
      /10-bridge\.conflist: is larger than 4194304 bytes, the most the plugin reads/,
    );
  });

  test("names host-local's reservation directory (its dataDir, or the default, with the network's name) and the ranges to import into", () => {
    const given = derived(
      derive(LIST, {
        cniVersion: '1.0.0',
        name: 'hl',
        plugins: [{ type: 'bridge', ipam: { type: 'host-local', subnet: '10.9.1.0/24', dataDir: '/srv/hl' } }],
      }),
    );
    assert.equal(given.hostLocal?.dataDir, '/srv/hl/hl');
    assert.deepEqual(
      given.hostLocal?.ranges.map((r) => r.subnet),
      ['10.9.1.0/24'],
    );
    const defaulted = derived(
      derive(LIST, {
        cniVersion: '1.0.0',
        name: 'hl',
        plugins: [{ type: 'bridge', ipam: { type: 'host-local', subnet: '10.9.1.0/24' } }],
      }),
    );
    assert.equal(defaulted.hostLocal?.dataDir, '/var/lib/cni/networks/hl');
    const whereabouts = derived(
      derive(LIST, {
        cniVersion: '1.0.0',
        name: 'wb',
        plugins: [{ type: 'bridge', ipam: { type: 'whereabouts', range: '10.9.2.0/24' } }],
      }),
    );
    assert.equal(whereabouts.hostLocal, undefined);
    refused(
      LIST,
      {
        cniVersion: '1.0.0',
        name: 'hl',
        plugins: [{ type: 'bridge', ipam: { type: 'host-local', subnet: '10.9.1.0/24', dataDir: 'relative/dir' } }],
      },
      ['dataDir', 'not an absolute path'],
    );
  });

  test('carries a marker naming the primary and the sha256 of its text', () => {
    const result = derived(deriveConfig(input));
    const sha256 = createHash('sha256').update(primaryText).digest('hex');
    assert.equal(result.primarySha256, sha256);
    const marker = result.out[GENERATED_MARKER] as Json;
    assert.deepEqual(Object.keys(marker), ['from', 'sha256', 'note']);
    assert.equal(marker.from, LIST);
    assert.equal(marker.sha256, sha256);
    assert.ok(typeof marker.note === 'string' && marker.note.length > 0);
  });

  test('differs from a reformatted primary only in the sha256', () => {
    const a = derived(deriveConfig(input));
    const b = derived(deriveConfig({ ...input, primaryText: JSON.stringify(primary) }));
    assert.notEqual(a.primarySha256, b.primarySha256);
    assert.notEqual(a.text, b.text);
    assert.equal(a.text.replace(a.primarySha256, ''), b.text.replace(b.primarySha256, ''));
  });

  test("has a main plugin that, given the list's name and cniVersion, passes the ADD parser", () => {
    for (const cap of ['0.3.0', '1.0.0', '1.1.0'] as const) {
      const { out } = derived(deriveConfig({ ...input, cniVersionMax: cap }));
      const conf = parseNetConf({ ...mainOf(out), name: out.name, cniVersion: out.cniVersion }, 'ADD');
      assert.equal(conf.name, 'cbr0');
      assert.equal(conf.cniVersion, cap === '1.1.0' ? '1.0.0' : cap);
      assert.deepEqual(
        conf.ipam.ranges.map((r) => r.subnet),
        ['10.1.0.0/24', 'fd00:1::/64'],
      );
      assert.deepEqual(
        conf.ipam.ranges.map((r) => r.gateway?.value),
        [0x0a010001n, 0xfd000001000000000000000000000001n],
      );
      assert.equal(conf.ipam.socket, '/run/warren.sock');
    }
  });
});

describe('isConfigName', () => {
  test('is true for .conf, .conflist and .json', () => {
    for (const name of ['10-bridge.conf', '10-calico.conflist', '99-loopback.json', DEFAULT_OUTPUT_NAME, 'a.b.conf'])
      assert.equal(isConfigName(name), true, name);
  });

  test('is true for dot-files with a config extension: libcni picks files by extension alone', () => {
    for (const name of ['.10-bridge.conf', '.conflist']) assert.equal(isConfigName(name), true, name);
  });

  test('is false for temp files, backups, other extensions and the bare extensions', () => {
    for (const name of [
      '.00-warren.conflist.tmp',
      '10-bridge.conf.bak',
      '10-bridge.conflist~',
      'notes.txt',
      'README',
      'conf',
      'x.conf.d',
      '10-bridge.CONF',
      'x.yaml',
    ]) {
      assert.equal(isConfigName(name), false, name);
    }
  });

  test('Warren writes a name that sorts before the usual primaries', () => {
    assert.equal(DEFAULT_OUTPUT_NAME, '00-warren.conflist');
    assert.deepEqual([LIST, '05-cilium.conflist', DEFAULT_OUTPUT_NAME].sort()[0], DEFAULT_OUTPUT_NAME);
  });
});

describe('deriveConfig on arbitrary input', () => {
  const files = fc.constantFrom(LIST, '10-net.conf', '10-net.json');
  const caps = fc.constantFrom(...SUPPORTED_VERSIONS);

  /** Answers, never throws: ok with text, or a refusal that names the file and says something. */
  function answers(primaryName: string, primaryText: string, cniVersionMax: CniVersion): Derivation {
    const result = deriveConfig({ primaryName, primaryText, cniVersionMax });
    if (result.ok) {
      assert.ok(result.text.endsWith('\n'));
    } else {
      assert.ok(result.reason.startsWith(`${primaryName}: `), result.reason);
      assert.ok(result.reason.length > primaryName.length + 2, 'the reason says why');
    }
    return result;
  }

  test('any string as the primary is answered, never thrown on', () => {
    fc.assert(
      fc.property(
        files,
        fc.oneof(fc.string({ maxLength: 60 }), fc.string({ unit: 'binary', maxLength: 60 })),
        caps,
        (file, text, cap) => {
          answers(file, text, cap);
        },
      ),
      { numRuns: 400 },
    );
  });

  test('any JSON text or value as the primary is answered, never thrown on', () => {
    fc.assert(
      fc.property(
        files,
        fc.oneof(
          fc.json(),
          fc.jsonValue().map((v) => JSON.stringify(v) ?? 'null'),
        ),
        caps,
        (file, text, cap) => {
          answers(file, text, cap);
        },
      ),
      { numRuns: 400 },
    );
  });

  // Mutations of a valid bridge + host-local conflist: random keys dropped or replaced.
  const anyValue: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 2 });
  /** Mostly `valid`, sometimes anything at all. */
  const mostly = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
    fc.oneof({ arbitrary: valid, weight: 40 }, { arbitrary: anyValue, weight: 1 });
  /** Usually absent (undefined, which JSON drops), sometimes `value`. */
  const rarely = <T>(value: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
    fc.oneof({ arbitrary: fc.constant(undefined), weight: 30 }, { arbitrary: value, weight: 1 });
  const versionText = fc.oneof(
    { arbitrary: fc.constantFrom(...SUPPORTED_VERSIONS), weight: 40 },
    {
      arbitrary: fc.constantFrom('0.1.0', '0.2.0', '0.4.1', '1.0.1', '1.2.0', '2.0.0', '01.0.0', '1.0', 'v1.0.0', ''),
      weight: 2,
    },
    { arbitrary: fc.tuple(fc.nat(12), fc.nat(12), fc.nat(12)).map(([a, b, c]) => `${a}.${b}.${c}`), weight: 1 },
    { arbitrary: fc.string({ maxLength: 8 }), weight: 1 },
  );
  const v4 = fc.tuple(fc.constantFrom(10, 172, 192), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join('.'));
  const v6 = fc
    .tuple(fc.constantFrom('fd00', 'fd12', '2001:db8'), fc.nat(0xffff), fc.nat(0xffff))
    .map(([p, a, b]) => `${p}::${a.toString(16)}:${b.toString(16)}`);
  const ipText = fc.oneof(
    { arbitrary: fc.nat(0xffff).map((n) => `10.22.${n >> 8}.${n & 0xff}`), weight: 4 },
    { arbitrary: fc.nat(255).map((n) => `10.22.0.${n}`), weight: 4 },
    { arbitrary: fc.oneof(v4, v6), weight: 1 },
    { arbitrary: fc.constantFrom('10.22.0.1', 'fd00::1', 'fd00::ff', '1.2.3', 'x', ''), weight: 1 },
  );
  const subnetText = fc.oneof(
    {
      arbitrary: fc.constantFrom(
        '10.22.0.0/16',
        '10.22.0.0/24',
        '10.22.0.0/30',
        'fd00::/64',
        'fd00::/126',
        '10.22.0.5/24',
      ),
      weight: 4,
    },
    {
      arbitrary: fc.constantFrom('10.22.0.0/31', 'fd00::/127', '10.0.0.0/33', '0.0.0.0/0', 'x/24', '10.22.0.0'),
      weight: 1,
    },
    { arbitrary: fc.tuple(fc.oneof(v4, v6), fc.nat(130)).map(([a, len]) => `${a}/${len}`), weight: 1 },
  );
  /** Subnets that do not overlap, each with a way to name its n-th address. */
  const BASES: readonly { subnet: string; at: (n: number) => string }[] = [
    { subnet: '10.22.0.0/24', at: (n) => `10.22.0.${n}` },
    { subnet: '10.23.0.0/24', at: (n) => `10.23.0.${n}` },
    { subnet: 'fd00:22::/64', at: (n) => `fd00:22::${n.toString(16)}` },
    { subnet: '10.24.0.0/30', at: (n) => `10.24.0.${n % 4}` },
  ];
  /** A range of base `i` whose addresses mostly lie in its subnet, or (rarely) one of random text. */
  const rangeOf = (i: number): fc.Arbitrary<Json> =>
    fc.oneof(
      {
        arbitrary: fc
          .tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.subarray(['rangeStart', 'rangeEnd', 'gateway'] as const))
          .map(([a, b, g, keys]) => {
            const base = BASES[i] ?? BASES[0];
            assert.ok(base !== undefined);
            const out: Json = { subnet: base.subnet };
            if (keys.includes('rangeStart')) out.rangeStart = base.at(Math.min(a, b));
            if (keys.includes('rangeEnd')) out.rangeEnd = base.at(Math.max(a, b));
            if (keys.includes('gateway')) out.gateway = base.at(g);
            return out;
          }),
        weight: 8,
      },
      {
        arbitrary: fc.record(
          { subnet: mostly(subnetText), rangeStart: mostly(ipText), rangeEnd: mostly(ipText), gateway: mostly(ipText) },
          { requiredKeys: ['subnet'] },
        ),
        weight: 1,
      },
    );
  const rangeSets = fc.oneof(
    {
      arbitrary: fc
        .uniqueArray(fc.integer({ min: 1, max: BASES.length - 1 }), { maxLength: 3 })
        .chain((bases) => fc.tuple(...bases.map((i) => fc.tuple(rangeOf(i))))),
      weight: 8,
    },
    { arbitrary: fc.array(fc.array(rangeOf(0), { maxLength: 2 }), { maxLength: 2 }), weight: 1 },
  );
  const legacy = rangeOf(0);
  const route = fc.record(
    {
      dst: mostly(
        fc.oneof(
          { arbitrary: fc.constantFrom('0.0.0.0/0', '192.168.0.0/16', '::/0'), weight: 4 },
          { arbitrary: subnetText, weight: 1 },
        ),
      ),
      gw: mostly(fc.oneof(ipText, fc.constant('10.22.0.1'))),
    },
    { requiredKeys: ['dst'] },
  );
  const hostLocalIpam = fc
    .tuple(
      fc.option(legacy, { freq: 4 }),
      fc.record(
        {
          type: mostly(
            fc.oneof(
              { arbitrary: fc.constant('host-local'), weight: 8 },
              { arbitrary: fc.constantFrom('whereabouts', 'warren', 'dhcp'), weight: 1 },
            ),
          ),
          ranges: mostly(rangeSets),
          routes: mostly(fc.array(route, { maxLength: 2 })),
          dataDir: mostly(fc.constant('/var/lib/cni/networks')),
          resolvConf: rarely(fc.constant('/etc/resolv.conf')),
          range: rarely(subnetText),
          rangestart: rarely(fc.constant('10.22.0.9')),
        },
        { requiredKeys: ['type', 'resolvConf', 'range', 'rangestart'] },
      ),
    )
    // Without the legacy keys, a range set, so that most sections name an address.
    .map(([old, rest]) => (old === null ? { ranges: [[{ subnet: '10.25.0.0/24' }]], ...rest } : { ...old, ...rest }));
  const bridge = fc.record(
    {
      type: mostly(fc.constant('bridge')),
      bridge: mostly(fc.constant('cni0')),
      isGateway: mostly(fc.boolean()),
      cniVersion: mostly(versionText),
      ipam: mostly(hostLocalIpam),
      runtimeConfig: rarely(anyValue),
      args: rarely(anyValue),
    },
    { requiredKeys: ['type', 'ipam', 'runtimeConfig', 'args'] },
  );
  const other = fc.oneof(
    { arbitrary: fc.constantFrom<unknown>(PORTMAP, TUNING), weight: 12 },
    {
      arbitrary: fc.record(
        { type: mostly(fc.constantFrom('portmap', 'bandwidth')), cniVersion: versionText },
        { requiredKeys: ['type'] },
      ),
      weight: 12,
    },
    { arbitrary: anyValue, weight: 1 },
  );
  const conflist = fc.record(
    {
      cniVersion: mostly(versionText),
      name: mostly(
        fc.oneof(
          { arbitrary: fc.constantFrom('cbr0', 'k8s-pod-network', 'a.b_c-1'), weight: 30 },
          { arbitrary: fc.constantFrom('bad name', '-x', ''), weight: 1 },
          { arbitrary: fc.string({ maxLength: 10 }), weight: 1 },
        ),
      ),
      plugins: mostly(
        fc
          .tuple(fc.array(other, { maxLength: 1 }), bridge, fc.array(other, { maxLength: 2 }))
          .map(([before, main, after]) => [...before, main, ...after]),
      ),
      disableCheck: fc.boolean(),
      [GENERATED_MARKER]: rarely(anyValue),
    },
    { requiredKeys: ['cniVersion', 'name', 'plugins', GENERATED_MARKER] },
  );
  /** Drops the value at a random path, or puts a random one there. */
  function mutate(value: unknown, picks: readonly [number, unknown, boolean][]): unknown {
    const copy: unknown = JSON.parse(JSON.stringify(value));
    for (const [pick, replacement, drop] of picks) {
      const slots: { holder: Record<string | number, unknown>; key: string | number; list: boolean }[] = [];
      const walk = (v: unknown): void => {
        if (Array.isArray(v)) {
          v.forEach((item, i) => {
            slots.push({ holder: v as unknown as Record<number, unknown>, key: i, list: true });
            walk(item);
          });
        } else if (typeof v === 'object' && v !== null) {
          for (const [k, item] of Object.entries(v)) {
            slots.push({ holder: v as Json, key: k, list: false });
            walk(item);
          }
        }
      };
      walk(copy);
      const slot = slots[pick % Math.max(slots.length, 1)];
      if (slot === undefined) continue;
      if (drop && !slot.list) delete slot.holder[slot.key];
      else slot.holder[slot.key] = replacement;
    }
    return copy;
  }
  const mutation = fc.oneof(
    { arbitrary: fc.constant([]), weight: 3 },
    {
      arbitrary: fc.array(fc.tuple(fc.noBias(fc.nat()), anyValue, fc.boolean()), { minLength: 1, maxLength: 2 }),
      weight: 2,
    },
  );
  /** A conflist, or its main plugin as a single-plugin config, named to be read as such. */
  // Unbiased: fast-check's bias toward small values would pick the anything-at-all branches far
  // more often than their weights say, and nothing would get past the first checks.
  const primaryCase = fc
    .tuple(fc.noBias(conflist), mutation, fc.constantFrom(LIST, LIST, '10-net.conf', '10-net.json'), caps)
    .map(([list, picks, file, cap]) => {
      let primary: unknown = list;
      if (file !== LIST && Array.isArray(list.plugins)) {
        const main = (list.plugins as unknown[]).find(
          (p) => typeof p === 'object' && p !== null && !Array.isArray(p) && 'ipam' in p,
        );
        primary = { ...(main as Json | undefined), cniVersion: list.cniVersion, name: list.name };
      }
      return { primary: mutate(primary, picks), file, cap };
    });

  test('mutated bridge + host-local configs never throw, and whatever is derived is a config the agent accepts at ADD', () => {
    let ok = 0;
    let total = 0;
    fc.assert(
      fc.property(primaryCase, ({ primary, file, cap }) => {
        total++;
        const text = JSON.stringify(primary, null, 2);
        const result = answers(file, text, cap);
        if (!result.ok) return;
        ok++;
        const out: unknown = JSON.parse(result.text);
        assert.ok(typeof out === 'object' && out !== null && !Array.isArray(out));
        const o = out as Json;
        // The marker, and the agent recognising its own output.
        assert.deepEqual(o[GENERATED_MARKER], {
          from: file,
          sha256: createHash('sha256').update(text).digest('hex'),
          note: (o[GENERATED_MARKER] as Json).note,
        });
        assert.equal(isGeneratedConfig(result.text), true);
        const again = deriveConfig({ primaryName: file, primaryText: result.text, cniVersionMax: cap });
        assert.ok(!again.ok, 'the output is never taken for a primary');
        // cniVersion: a supported one, no newer than the cap.
        assert.equal(o.cniVersion, result.cniVersion);
        assert.ok(typeof o.cniVersion === 'string' && isSupportedVersion(o.cniVersion), String(o.cniVersion));
        assert.ok(compareVersions(o.cniVersion, cap) <= 0, `${o.cniVersion} above ${cap}`);
        assert.equal(o.name, result.network);
        // Every plugin's own cniVersion agrees with the list's.
        const plugins = pluginsOf(o);
        assert.ok(plugins.length > 0);
        for (const p of plugins) if (p.cniVersion !== undefined) assert.equal(p.cniVersion, o.cniVersion);
        // The main plugin, read back from the text, passes the ADD parser.
        const main = mainOf(o);
        assert.equal((main.ipam as Json).type, 'warren');
        // Every other plugin as the primary has it, its own cniVersion aside.
        const read: unknown = JSON.parse(text);
        assert.ok(typeof read === 'object' && read !== null && !Array.isArray(read));
        const { cniVersion: _v, name: _n, ...single } = read as Json;
        const before = file === LIST ? ((read as Json).plugins as Json[]) : [single];
        assert.equal(plugins.length, before.length);
        plugins.forEach((p, i) => {
          if (p === main) return;
          const expected = { ...before[i] };
          if (expected.cniVersion !== undefined) expected.cniVersion = o.cniVersion;
          assert.deepEqual(p, expected, `plugins[${i}]`);
        });
        parseNetConf({ ...main, name: o.name, cniVersion: o.cniVersion }, 'ADD');
        // The same primary gives the same text.
        const twice = deriveConfig({ primaryName: file, primaryText: text, cniVersionMax: cap });
        assert.ok(twice.ok && twice.text === result.text);
      }),
      { numRuns: 500 },
    );
    // The generator is meant to reach the success path, not only the refusals.
    assert.ok(ok >= total / 12, `only ${ok} of ${total} derived`);
  });
});

describe('deriveConfig keeps what libcni and host-local would do (defects found by review)', () => {
  test('caps a cniVersions list too, so a runtime that reads it cannot pick a version above the cap', () => {
    const { out } = derived(
      derive(LIST, { ...hostLocal({ subnet: '10.30.0.0/24' }), cniVersions: ['0.4.0', '1.0.0', '1.1.0'] }, '1.0.0'),
    );
    assert.deepEqual(out.cniVersions, ['0.4.0', '1.0.0']);
  });

  test('refuses a conflist plugin whose type is empty, as libcni does', () => {
    const primary = hostLocal({ subnet: '10.30.1.0/24' });
    refused(LIST, { ...primary, plugins: [...(primary.plugins as Json[]), { type: '' }] }, ['"type"']);
  });

  test('refuses a main plugin that asks for the ipRanges capability: its ranges would come from the runtime', () => {
    const primary = hostLocal({ subnet: '10.30.2.0/24' });
    const [main, ...rest] = primary.plugins as Json[];
    refused(LIST, { ...primary, plugins: [{ ...main, capabilities: { ipRanges: true } }, ...rest] }, [
      'ipRanges capability',
    ]);
  });

  test('says an unknown cniVersion is not one Warren speaks, not that it is older', () => {
    refused(LIST, hostLocal({ subnet: '10.30.3.0/24' }, '1.0.1'), ['cniVersion 1.0.1 is not one Warren speaks']);
  });

  test('keeps a top-level key named __proto__ as a key', () => {
    const text = `{"cniVersion":"1.0.0","name":"p","__proto__":{"x":1},"plugins":[{"type":"bridge","ipam":{"type":"host-local","subnet":"10.30.4.0/24"}}]}`;
    const { out, text: written } = derived(
      deriveConfig({ primaryName: LIST, primaryText: text, cniVersionMax: '1.0.0' }),
    );
    assert.ok(Object.hasOwn(out, '__proto__'), written);
  });

  test('takes host-local keys given as null, or resolvConf as "", as unset, as Go decodes them', () => {
    const { out } = derived(
      derive(LIST, hostLocal({ subnet: '10.30.5.0/24', resolvConf: '', dataDir: null, rangeStart: null })),
    );
    assert.deepEqual(mainOf(out).ipam, { type: 'warren', ipRanges: [{ range: '10.30.5.0/24', gateway: '10.30.5.1' }] });
  });
});
