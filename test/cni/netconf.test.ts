/**
 * parseNetConf: which cniVersion each command may use, what Warren collects from the config
 * (requested addresses, prevResult, GC's valid attachments), and that any JSON at all yields a
 * config or a WarrenError. renderResult: ips[].version exists only before 1.0.0.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { WarrenError } from '../../src/core/errors.ts';
import type { WarrenErrorCode } from '../../src/api/errors.ts';
import { formatIP } from '../../src/ipam/address.ts';
import { parseNetConf, declaredVersion } from '../../src/cni/netconf.ts';
import {
  type CniCommand,
  type IpamResult,
  COMMANDS,
  SUPPORTED_VERSIONS,
  renderResult,
  versionResult,
} from '../../src/cni/spec.ts';

const IPAM = { type: 'warren', range: '10.0.0.0/24' };

function conf(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { cniVersion: '1.1.0', name: 'podnet', type: 'bridge', ipam: IPAM, ...extra };
}

function refused(raw: unknown, command: CniCommand, code: WarrenErrorCode, message?: RegExp): void {
  assert.throws(
    () => parseNetConf(raw, command),
    (error: unknown) => {
      assert.ok(error instanceof WarrenError, `expected a WarrenError, got ${String(error)}`);
      assert.equal(error.code, code, error.message);
      if (message !== undefined) assert.match(error.message, message);
      return true;
    },
  );
}

const texts = (ips: readonly { family: 4 | 6; value: bigint }[] | undefined): string[] | undefined =>
  ips?.map((ip) => formatIP(ip));

describe('parseNetConf versions', () => {
  test('every supported version is accepted for ADD and DEL', () => {
    for (const cniVersion of ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
      for (const command of ['ADD', 'DEL'] as const) {
        const parsed = parseNetConf(conf({ cniVersion }), command);
        assert.equal(parsed.cniVersion, cniVersion);
        assert.equal(parsed.name, 'podnet');
        assert.equal(parsed.ipam.ranges[0]?.subnet, '10.0.0.0/24');
        assert.deepEqual(parsed.requested, []);
        assert.equal(parsed.previousIPs, undefined);
        assert.equal(parsed.validAttachments, undefined);
      }
    }
    assert.deepEqual([...SUPPORTED_VERSIONS], ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  });

  test('unsupported versions are refused as incompatible', () => {
    for (const cniVersion of ['0.1.0', '0.2.0', '2.0.0', '1.2.0', '1.0', '1.0.0 ', 'v1.0.0', '1.0.0-rc1', 'latest']) {
      refused(conf({ cniVersion }), 'ADD', 'INCOMPATIBLE_VERSION', /not supported/);
    }
  });

  test('a missing or non-string cniVersion is an invalid config', () => {
    refused({ name: 'podnet', ipam: IPAM }, 'ADD', 'INVALID_CONFIG', /^cniVersion/);
    refused(conf({ cniVersion: '' }), 'ADD', 'INVALID_CONFIG', /^cniVersion/);
    refused(conf({ cniVersion: 1 }), 'ADD', 'INVALID_CONFIG', /^cniVersion/);
    refused(conf({ cniVersion: null }), 'ADD', 'INVALID_CONFIG', /^cniVersion/);
  });

  test('CHECK needs 0.4.0 or later', () => {
    refused(conf({ cniVersion: '0.3.0' }), 'CHECK', 'INCOMPATIBLE_VERSION', /CHECK needs cniVersion 0\.4\.0/);
    refused(conf({ cniVersion: '0.3.1' }), 'CHECK', 'INCOMPATIBLE_VERSION', /CHECK needs/);
    for (const cniVersion of ['0.4.0', '1.0.0', '1.1.0'])
      assert.equal(parseNetConf(conf({ cniVersion }), 'CHECK').cniVersion, cniVersion);
  });

  test('GC and STATUS need 1.1.0', () => {
    for (const command of ['GC', 'STATUS'] as const) {
      for (const cniVersion of ['0.3.1', '0.4.0', '1.0.0'])
        refused(
          conf({ cniVersion }),
          command,
          'INCOMPATIBLE_VERSION',
          new RegExp(`${command} needs cniVersion 1\\.1\\.0`),
        );
      assert.equal(parseNetConf(conf({ cniVersion: '1.1.0' }), command).cniVersion, '1.1.0');
    }
  });

  test('declaredVersion reports a usable version only', () => {
    assert.equal(declaredVersion(conf({ cniVersion: '0.4.0' })), '0.4.0');
    assert.equal(declaredVersion(conf({ cniVersion: '0.2.0' })), undefined);
    assert.equal(declaredVersion(conf({ cniVersion: 4 })), undefined);
    assert.equal(declaredVersion('1.0.0'), undefined);
    assert.equal(declaredVersion(null), undefined);
  });
});

describe('parseNetConf fields', () => {
  test('a config that is not an object is refused', () => {
    for (const raw of [null, undefined, 'x', 3, [], [conf()]]) refused(raw, 'ADD', 'INVALID_CONFIG', /JSON object/);
  });

  test('the network name is required and must be safe', () => {
    refused(conf({ name: undefined }), 'ADD', 'INVALID_CONFIG', /^name: missing/);
    for (const name of ['', '-x', '.x', 'a b', 'a/b', 'n'.repeat(254), 7, null, ['a']])
      refused(conf({ name }), 'ADD', 'INVALID_CONFIG', /^name: /);
    assert.equal(parseNetConf(conf({ name: `a${'b'.repeat(252)}` }), 'ADD').name.length, 253);
    assert.equal(parseNetConf(conf({ name: 'k8s-pod-network.v1_2' }), 'ADD').name, 'k8s-pod-network.v1_2');
  });

  test('a name that is an object with its own toString key is an invalid config, not a crash', () => {
    // Regression: the message was built with String(value), which throws a TypeError for
    // {"toString": 1}, so a config mistake surfaced as an internal error.
    refused(conf({ name: { toString: 1 } }), 'ADD', 'INVALID_CONFIG', /^name: /);
    refused(conf({ name: [{ toString: 1 }] }), 'ADD', 'INVALID_CONFIG', /^name: /);
    refused(
      conf({ runtimeConfig: { ips: [{ toString: 'x', valueOf: 'y' }] } }),
      'ADD',
      'INVALID_CONFIG',
      /^runtimeConfig\.ips\[0\]: /,
    );
  });

  test('the ipam section is required and validated, its problems named by path', () => {
    refused(conf({ ipam: undefined }), 'ADD', 'INVALID_CONFIG', /^ipam: missing/);
    refused(conf({ ipam: { type: 'warren' } }), 'ADD', 'INVALID_CONFIG', /^ipam: /);
    refused(conf({ ipam: { ...IPAM, range_start: '10.0.1.1' } }), 'ADD', 'INVALID_CONFIG', /^ipam\.range_start: /);
  });

  test('keys of the main plugin are left alone', () => {
    const parsed = parseNetConf(
      conf({ bridge: 'cni0', isGateway: true, mtu: 1450, capabilities: { ips: true } }),
      'ADD',
    );
    assert.equal(parsed.name, 'podnet');
  });

  test('requested addresses come from runtimeConfig.ips and args.cni.ips, with or without a prefix', () => {
    const parsed = parseNetConf(
      conf({ runtimeConfig: { ips: ['10.0.0.5/24', 'fd00::5'] }, args: { cni: { ips: ['10.0.0.6'] } } }),
      'ADD',
    );
    assert.deepEqual(texts(parsed.requested), ['10.0.0.5', 'fd00::5', '10.0.0.6']);
    assert.deepEqual(
      parsed.requested.map((ip) => ip.family),
      [4, 6, 4],
    );
    assert.deepEqual(parseNetConf(conf({ runtimeConfig: {} }), 'ADD').requested, []);
    assert.deepEqual(parseNetConf(conf({ runtimeConfig: { portMappings: [] } }), 'ADD').requested, []);
  });

  test('a malformed requested address is refused, naming its position', () => {
    refused(conf({ runtimeConfig: [] }), 'ADD', 'INVALID_CONFIG', /^runtimeConfig: /);
    refused(conf({ runtimeConfig: { ips: '10.0.0.5' } }), 'ADD', 'INVALID_CONFIG', /^runtimeConfig\.ips: /);
    refused(
      conf({ runtimeConfig: { ips: ['10.0.0.5', '10.0.0.256'] } }),
      'ADD',
      'INVALID_CONFIG',
      /^runtimeConfig\.ips\[1\]: /,
    );
    refused(conf({ runtimeConfig: { ips: [5] } }), 'ADD', 'INVALID_CONFIG', /^runtimeConfig\.ips\[0\]: /);
    refused(conf({ runtimeConfig: { ips: ['10.0.0.5/33'] } }), 'ADD', 'INVALID_CONFIG', /^runtimeConfig\.ips\[0\]: /);
    refused(conf({ args: { cni: { ips: ['fe80::1%eth0'] } } }), 'ADD', 'INVALID_CONFIG', /^args\.cni\.ips\[0\]: /);
    refused(conf({ args: { cni: { ips: {} } } }), 'ADD', 'INVALID_CONFIG', /^args\.cni\.ips: /);
  });

  test('args without a cni object carry no addresses', () => {
    assert.deepEqual(parseNetConf(conf({ args: 'x' }), 'ADD').requested, []);
    assert.deepEqual(parseNetConf(conf({ args: { cni: 'x' } }), 'ADD').requested, []);
    assert.deepEqual(parseNetConf(conf({ args: { other: { ips: ['bad'] } } }), 'ADD').requested, []);
  });

  test('prevResult addresses are collected', () => {
    const prevResult = {
      cniVersion: '1.1.0',
      ips: [{ address: '10.0.0.5/24', gateway: '10.0.0.1' }, { address: 'fd00::5/64' }],
      routes: [],
      dns: {},
    };
    assert.deepEqual(texts(parseNetConf(conf({ prevResult }), 'DEL').previousIPs), ['10.0.0.5', 'fd00::5']);
    assert.deepEqual(texts(parseNetConf(conf({ prevResult, cniVersion: '0.4.0' }), 'CHECK').previousIPs), [
      '10.0.0.5',
      'fd00::5',
    ]);
    assert.deepEqual(parseNetConf(conf({ prevResult: { cniVersion: '1.1.0' } }), 'DEL').previousIPs, []);
  });

  test('a malformed prevResult is refused', () => {
    refused(conf({ prevResult: 'x' }), 'DEL', 'INVALID_CONFIG', /^prevResult: /);
    refused(conf({ prevResult: { ips: {} } }), 'DEL', 'INVALID_CONFIG', /^prevResult\.ips: /);
    refused(
      conf({ prevResult: { ips: [{ address: '10.0.0.5/24' }, { address: '10.0.0.6' }] } }),
      'DEL',
      'INVALID_CONFIG',
      /^prevResult\.ips\[1\]\.address: /,
    );
    refused(
      conf({ prevResult: { ips: ['10.0.0.5/24'] } }),
      'DEL',
      'INVALID_CONFIG',
      /^prevResult\.ips\[0\]\.address: /,
    );
  });

  test('GC collects the valid attachments', () => {
    const parsed = parseNetConf(
      conf({
        'cni.dev/valid-attachments': [
          { containerID: 'c1', ifname: 'eth0' },
          { containerID: 'c2', ifname: 'net1', extra: true },
        ],
      }),
      'GC',
    );
    assert.deepEqual(parsed.validAttachments, [
      { containerID: 'c1', ifname: 'eth0' },
      { containerID: 'c2', ifname: 'net1' },
    ]);
    assert.deepEqual(parseNetConf(conf(), 'GC').validAttachments, []);
  });

  test('GC refuses malformed valid attachments', () => {
    refused(conf({ 'cni.dev/valid-attachments': {} }), 'GC', 'INVALID_CONFIG', /^cni\.dev\/valid-attachments: /);
    refused(
      conf({ 'cni.dev/valid-attachments': [{ containerID: 'c1' }] }),
      'GC',
      'INVALID_CONFIG',
      /^cni\.dev\/valid-attachments\[0\]: /,
    );
    refused(
      conf({ 'cni.dev/valid-attachments': [{ containerID: 'c1', ifname: 'eth0' }, 'c2'] }),
      'GC',
      'INVALID_CONFIG',
      /\[1\]: /,
    );
  });

  test('commands other than GC ignore valid attachments', () => {
    assert.equal(parseNetConf(conf({ 'cni.dev/valid-attachments': 'junk' }), 'DEL').validAttachments, undefined);
  });
});

describe('parseNetConf on arbitrary input', () => {
  function onlyWarrenErrors(raw: unknown, command: CniCommand): void {
    try {
      parseNetConf(raw, command);
    } catch (error) {
      assert.ok(error instanceof WarrenError, `threw a non-WarrenError: ${String(error)}`);
      assert.ok(error.code === 'INVALID_CONFIG' || error.code === 'INCOMPATIBLE_VERSION', error.code);
    }
  }

  const command = fc.constantFrom(...COMMANDS.filter((c) => c !== 'VERSION'));

  test('any JSON value gives a config or a WarrenError', () => {
    fc.assert(fc.property(fc.jsonValue(), command, onlyWarrenErrors), { numRuns: 500 });
  });

  test('a valid config with random values in the fields Warren reads gives a config or a WarrenError', () => {
    // Objects with own toString/valueOf keys are JSON a runtime may pass; they must not crash message building.
    const hostile = fc.constantFrom<unknown>({ toString: 1 }, { valueOf: 'x', toString: null }, [{ toString: 1 }], {
      ips: [{ toString: 1 }],
    });
    const anyValue = fc.oneof(fc.jsonValue({ maxDepth: 3 }), hostile);
    const ipList = fc.array(fc.oneof(fc.constantFrom('10.0.0.5', '10.0.0.5/24', 'fd00::5/64', 'x', ''), anyValue), {
      maxLength: 3,
    });
    const maybe = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<unknown> => fc.oneof(fc.constant(undefined), arb, anyValue);
    const raw = fc.record({
      cniVersion: fc.oneof({ arbitrary: fc.constantFrom(...SUPPORTED_VERSIONS), weight: 8 }, anyValue),
      name: fc.oneof({ arbitrary: fc.constant('podnet'), weight: 4 }, fc.string(), anyValue),
      ipam: fc.oneof({ arbitrary: fc.constant(IPAM), weight: 6 }, anyValue),
      runtimeConfig: maybe(fc.record({ ips: maybe(ipList) }, { requiredKeys: [] })),
      args: maybe(
        fc.record({ cni: maybe(fc.record({ ips: maybe(ipList) }, { requiredKeys: [] })) }, { requiredKeys: [] }),
      ),
      prevResult: maybe(
        fc.record(
          {
            ips: maybe(
              fc.array(
                fc.record(
                  { address: maybe(fc.constantFrom('10.0.0.5/24', '10.0.0.5', 'fd00::1/64')) },
                  { requiredKeys: [] },
                ),
                { maxLength: 3 },
              ),
            ),
          },
          { requiredKeys: [] },
        ),
      ),
      'cni.dev/valid-attachments': maybe(
        fc.array(fc.record({ containerID: maybe(fc.string()), ifname: maybe(fc.string()) }, { requiredKeys: [] }), {
          maxLength: 3,
        }),
      ),
    });
    let parsed = 0;
    fc.assert(
      fc.property(raw, command, (value, cmd) => {
        // Through JSON, as the runtime hands it over (also drops undefined keys).
        const json: unknown = JSON.parse(JSON.stringify(value));
        onlyWarrenErrors(json, cmd);
        try {
          parseNetConf(json, cmd);
          parsed++;
        } catch {
          // Checked above.
        }
      }),
      { numRuns: 1000 },
    );
    assert.ok(parsed > 0, 'no generated config parsed');
  });
});

describe('renderResult', () => {
  const result: IpamResult = {
    ips: [{ address: '10.0.0.5/24', gateway: '10.0.0.1' }, { address: 'fd00::5/64' }],
    routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }],
    dns: { nameservers: ['10.0.0.53'] },
  };

  test('results before 1.0.0 carry ips[].version', () => {
    for (const version of ['0.3.0', '0.3.1', '0.4.0'] as const) {
      assert.deepEqual(renderResult(result, version), {
        cniVersion: version,
        ips: [
          { version: '4', address: '10.0.0.5/24', gateway: '10.0.0.1' },
          { version: '6', address: 'fd00::5/64' },
        ],
        routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }],
        dns: { nameservers: ['10.0.0.53'] },
      });
    }
  });

  test('results from 1.0.0 on do not carry ips[].version', () => {
    for (const version of ['1.0.0', '1.1.0'] as const) {
      const rendered = renderResult(result, version);
      assert.deepEqual(rendered, {
        cniVersion: version,
        ips: [{ address: '10.0.0.5/24', gateway: '10.0.0.1' }, { address: 'fd00::5/64' }],
        routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }],
        dns: { nameservers: ['10.0.0.53'] },
      });
      for (const ip of rendered.ips as object[]) assert.equal('version' in ip, false);
    }
  });

  test('an empty result renders empty lists', () => {
    assert.deepEqual(renderResult({ ips: [], routes: [], dns: {} }, '0.3.1'), {
      cniVersion: '0.3.1',
      ips: [],
      routes: [],
      dns: {},
    });
  });

  test('VERSION lists every supported version', () => {
    assert.deepEqual(versionResult(), {
      cniVersion: '1.1.0',
      supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'],
    });
  });
});
