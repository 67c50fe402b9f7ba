/**
 * The CNI environment and CNI_ARGS: what each command needs, and that every problem, whatever the
 * input, is a BAD_ENV error naming the variable.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { WarrenError } from '../../src/core/errors.ts';
import { parseCniArgs, parseCniEnv, printable } from '../../src/cni/args.ts';

const ADD_ENV = {
  CNI_COMMAND: 'ADD',
  CNI_CONTAINERID: 'c0ffee',
  CNI_NETNS: '/var/run/netns/cni-1234',
  CNI_IFNAME: 'eth0',
  CNI_PATH: '/opt/cni/bin',
};

/** Asserts a BAD_ENV error whose message starts with the variable's name. */
function badEnv(fn: () => unknown, variable: string, detail?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof WarrenError, `expected a WarrenError, got ${String(error)}`);
    assert.equal(error.code, 'BAD_ENV');
    assert.ok(error.message.startsWith(variable), `message "${error.message}" should start with ${variable}`);
    if (detail !== undefined) assert.match(error.message, detail);
    return true;
  });
}

describe('parseCniEnv', () => {
  test('reads a full ADD environment', () => {
    assert.deepEqual(parseCniEnv({ ...ADD_ENV, CNI_ARGS: 'K8S_POD_NAME=web' }), {
      command: 'ADD',
      containerID: 'c0ffee',
      netns: '/var/run/netns/cni-1234',
      ifname: 'eth0',
      args: 'K8S_POD_NAME=web',
    });
  });

  test('CNI_ARGS defaults to empty', () => {
    assert.equal(parseCniEnv(ADD_ENV).args, '');
  });

  test('a missing or unknown CNI_COMMAND is refused', () => {
    badEnv(() => parseCniEnv({}), 'CNI_COMMAND', /not set/);
    badEnv(() => parseCniEnv({ CNI_COMMAND: '' }), 'CNI_COMMAND', /not set/);
    for (const command of ['add', 'FOO', ' ADD', 'ADD ', 'DELETE'])
      badEnv(() => parseCniEnv({ ...ADD_ENV, CNI_COMMAND: command }), 'CNI_COMMAND', /not one of/);
  });

  test('ADD, DEL and CHECK need a container ID', () => {
    for (const command of ['ADD', 'DEL', 'CHECK']) {
      badEnv(
        () => parseCniEnv({ ...ADD_ENV, CNI_COMMAND: command, CNI_CONTAINERID: undefined }),
        'CNI_CONTAINERID',
        /not set/,
      );
      badEnv(
        () => parseCniEnv({ ...ADD_ENV, CNI_COMMAND: command, CNI_CONTAINERID: '' }),
        'CNI_CONTAINERID',
        /not set/,
      );
    }
  });

  test('a container ID that could escape a path or a log line is refused', () => {
    for (const id of ['a/b', '../etc', '..', '.hidden', '-rf', '_x', 'a\0b', 'a b', 'a\nb', 'x'.repeat(256), 'café']) {
      badEnv(() => parseCniEnv({ ...ADD_ENV, CNI_CONTAINERID: id }), 'CNI_CONTAINERID', /must be/);
    }
  });

  test('a container ID of 255 characters, dots, dashes and underscores is accepted', () => {
    const long = `a${'b'.repeat(254)}`;
    assert.equal(parseCniEnv({ ...ADD_ENV, CNI_CONTAINERID: long }).containerID, long);
    assert.equal(parseCniEnv({ ...ADD_ENV, CNI_CONTAINERID: '0a.b-c_d' }).containerID, '0a.b-c_d');
  });

  test('a control character in a refused value is shown escaped, not raw', () => {
    assert.throws(
      () => parseCniEnv({ ...ADD_ENV, CNI_CONTAINERID: 'a\nfake log line' }),
      (error: unknown) =>
        error instanceof WarrenError && !error.message.includes('\n') && error.message.includes('\\x0a'),
    );
  });

  test('a control character in CNI_COMMAND is shown escaped, not raw', () => {
    // Regression: the command was the one refused value put into the message unescaped.
    badEnv(
      () => parseCniEnv({ CNI_COMMAND: 'ADD\nlevel=info msg=forged' }),
      'CNI_COMMAND',
      /"ADD\\x0alevel=info msg=forged"/,
    );
  });

  test('ADD, DEL and CHECK need a valid interface name', () => {
    for (const command of ['ADD', 'DEL', 'CHECK']) {
      badEnv(() => parseCniEnv({ ...ADD_ENV, CNI_COMMAND: command, CNI_IFNAME: undefined }), 'CNI_IFNAME', /not set/);
    }
    for (const ifname of ['', 'a'.repeat(16), 'eth 0', 'eth/0', 'eth:0', 'eth\0']) {
      badEnv(() => parseCniEnv({ ...ADD_ENV, CNI_IFNAME: ifname }), 'CNI_IFNAME');
    }
    assert.equal(parseCniEnv({ ...ADD_ENV, CNI_IFNAME: 'a'.repeat(15) }).ifname, 'a'.repeat(15));
    assert.equal(parseCniEnv({ ...ADD_ENV, CNI_IFNAME: 'net1.100' }).ifname, 'net1.100');
  });

  test('ADD and CHECK need a network namespace', () => {
    for (const command of ['ADD', 'CHECK']) {
      badEnv(() => parseCniEnv({ ...ADD_ENV, CNI_COMMAND: command, CNI_NETNS: undefined }), 'CNI_NETNS', /not set/);
      badEnv(() => parseCniEnv({ ...ADD_ENV, CNI_COMMAND: command, CNI_NETNS: '' }), 'CNI_NETNS', /not set/);
    }
  });

  test('DEL accepts a missing or empty network namespace', () => {
    const missing = parseCniEnv({ ...ADD_ENV, CNI_COMMAND: 'DEL', CNI_NETNS: undefined });
    assert.equal(missing.command, 'DEL');
    assert.equal(missing.netns, undefined);
    assert.equal(missing.containerID, 'c0ffee');
    const empty = parseCniEnv({ ...ADD_ENV, CNI_COMMAND: 'DEL', CNI_NETNS: '' });
    assert.equal(empty.netns, undefined);
    assert.equal('netns' in empty, false);
    assert.equal(parseCniEnv({ ...ADD_ENV, CNI_COMMAND: 'DEL' }).netns, ADD_ENV.CNI_NETNS);
  });

  test('GC, STATUS and VERSION need no container environment', () => {
    for (const command of ['GC', 'STATUS', 'VERSION']) {
      assert.deepEqual(parseCniEnv({ CNI_COMMAND: command }), { command, args: '' });
      // Whatever container variables are present are not looked at.
      assert.deepEqual(parseCniEnv({ CNI_COMMAND: command, CNI_CONTAINERID: '../x', CNI_IFNAME: 'eth 0' }), {
        command,
        args: '',
      });
    }
  });

  test('random environments either parse or are refused with BAD_ENV naming a CNI variable', () => {
    const text = fc.oneof(
      fc.constantFrom('', 'eth0', 'c0ffee', '/run/netns/x', '..', 'a/b', 'x'.repeat(300)),
      fc.string({ maxLength: 20 }),
      fc.string({ unit: 'binary', maxLength: 20 }),
    );
    const env = fc.record(
      {
        CNI_COMMAND: fc.oneof(fc.constantFrom('ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION'), text),
        CNI_CONTAINERID: text,
        CNI_NETNS: text,
        CNI_IFNAME: text,
        CNI_ARGS: text,
        CNI_PATH: text,
      },
      { requiredKeys: [] },
    );
    let parsed = 0;
    fc.assert(
      fc.property(env, (e) => {
        try {
          const out = parseCniEnv(e);
          parsed++;
          if (out.command === 'ADD' || out.command === 'CHECK') assert.ok(out.netns !== undefined && out.netns !== '');
          if (out.command === 'ADD' || out.command === 'DEL' || out.command === 'CHECK') {
            assert.ok(out.containerID !== undefined && !out.containerID.includes('/'));
            assert.ok(out.ifname !== undefined && out.ifname.length <= 15);
          }
        } catch (error) {
          assert.ok(error instanceof WarrenError, `threw a non-WarrenError: ${String(error)}`);
          assert.equal(error.code, 'BAD_ENV');
          assert.match(error.message, /^CNI_(COMMAND|CONTAINERID|IFNAME|NETNS) /);
          // biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for control characters
          assert.ok(!/[\x00-\x1f\x7f]/.test(error.message), 'control character in the message');
        }
      }),
      { numRuns: 1000 },
    );
    assert.ok(parsed > 0);
  });
});

describe('parseCniArgs', () => {
  test('empty arguments give no pod and no addresses', () => {
    assert.deepEqual(parseCniArgs(''), { ips: [] });
  });

  test('reads the Kubernetes pod identity', () => {
    assert.deepEqual(
      parseCniArgs(
        'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=1234-5678',
      ),
      { ips: [], podNamespace: 'default', podName: 'web-0', podUID: '1234-5678' },
    );
  });

  test('known keys are accepted without IgnoreUnknown', () => {
    assert.deepEqual(
      parseCniArgs('K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_NETWORK=n;K8S_POD_INFRA_CONTAINER_ID=c'),
      {
        ips: [],
        podNamespace: 'ns',
        podName: 'p',
      },
    );
  });

  test('empty values are treated as absent', () => {
    assert.deepEqual(parseCniArgs('K8S_POD_NAMESPACE=;K8S_POD_NAME=;IP='), { ips: [] });
  });

  test('IP= takes one address or a comma-separated list, trimmed', () => {
    assert.deepEqual(parseCniArgs('IP=10.0.0.5').ips, ['10.0.0.5']);
    assert.deepEqual(parseCniArgs('IP=10.0.0.5, fd00::5').ips, ['10.0.0.5', 'fd00::5']);
    assert.deepEqual(parseCniArgs('IP=10.0.0.5/24,fd00::5/64').ips, ['10.0.0.5/24', 'fd00::5/64']);
  });

  test('a pair with two "=" is refused, as the reference library refuses it', () => {
    badEnv(() => parseCniArgs('K8S_POD_NAME=a=b'), 'CNI_ARGS', /"K8S_POD_NAME=a=b" is not KEY=VALUE/);
  });

  test('unknown keys are refused unless IgnoreUnknown is set', () => {
    badEnv(() => parseCniArgs('FOO=bar'), 'CNI_ARGS', /unknown argument "FOO"/);
    badEnv(() => parseCniArgs('K8S_POD_NAME=web;FOO=bar'), 'CNI_ARGS', /IgnoreUnknown/);
    badEnv(() => parseCniArgs('IgnoreUnknown=0;FOO=bar'), 'CNI_ARGS');
    badEnv(() => parseCniArgs('IgnoreUnknown=false;FOO=bar'), 'CNI_ARGS');
    badEnv(() => parseCniArgs('IgnoreUnknown=yes;FOO=bar'), 'CNI_ARGS');
    badEnv(() => parseCniArgs('ip=10.0.0.5'), 'CNI_ARGS', /unknown argument "ip"/);
    for (const on of ['1', 'true', 'TRUE', 'True']) {
      assert.deepEqual(parseCniArgs(`IgnoreUnknown=${on};FOO=bar;K8S_POD_NAME=web`), { ips: [], podName: 'web' });
    }
    // Order does not matter.
    assert.deepEqual(parseCniArgs('FOO=bar;IgnoreUnknown=1'), { ips: [] });
  });

  test('malformed pairs are refused', () => {
    for (const text of [
      'FOO',
      '=bar',
      ';',
      'K8S_POD_NAME=web;',
      ';K8S_POD_NAME=web',
      'K8S_POD_NAME=web;;IP=10.0.0.5',
      'IgnoreUnknown=1;junk',
    ]) {
      badEnv(() => parseCniArgs(text), 'CNI_ARGS', /is not KEY=VALUE/);
    }
  });

  test('random CNI_ARGS strings either parse or are refused with BAD_ENV', () => {
    const key = fc.oneof(
      fc.constantFrom('IgnoreUnknown', 'K8S_POD_NAMESPACE', 'K8S_POD_NAME', 'K8S_POD_UID', 'IP', 'FOO', ''),
      fc.string({ maxLength: 6 }),
    );
    const value = fc.oneof(
      fc.constantFrom('1', 'true', '0', '10.0.0.5', '10.0.0.5,fd00::1', ''),
      fc.string({ maxLength: 10 }),
    );
    const pair = fc.oneof(
      fc.tuple(key, value).map(([k, v]) => `${k}=${v}`),
      fc.string({ maxLength: 8 }),
    );
    const argsText = fc.oneof(
      fc.array(pair, { maxLength: 5 }).map((pairs) => pairs.join(';')),
      fc.string({ unit: 'binary', maxLength: 30 }),
    );
    let parsed = 0;
    fc.assert(
      fc.property(argsText, (text) => {
        try {
          const args = parseCniArgs(text);
          parsed++;
          assert.ok(Array.isArray(args.ips));
          for (const field of [args.podNamespace, args.podName, args.podUID])
            assert.ok(field === undefined || field.length > 0);
        } catch (error) {
          assert.ok(error instanceof WarrenError, `threw a non-WarrenError: ${String(error)}`);
          assert.equal(error.code, 'BAD_ENV');
          assert.match(error.message, /^CNI_ARGS: /);
          // biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for control characters
          assert.ok(!/[\x00-\x1f\x7f]/.test(error.message), 'control character in the message');
        }
      }),
      { numRuns: 1000 },
    );
    assert.ok(parsed > 0);
  });
});

describe('printable', () => {
  test('escapes control characters and shortens long text', () => {
    assert.equal(printable('a\nb\x7f'), 'a\\x0ab\\x7f');
    assert.equal(printable('x'.repeat(100)), `${'x'.repeat(80)}...`);
    assert.equal(printable('plain'), 'plain');
  });
});
