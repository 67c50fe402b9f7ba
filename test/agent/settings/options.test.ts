import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { type AgentOptions, resolveAgentOptions } from '../../../src/agent/settings/options.ts';
import { SETTINGS, SETTING_KEYS, agentSocket } from '../../../src/agent/settings/table.ts';
import { formatListenAddress, metricsAddressOf } from '../../../src/agent/settings/listen-address.ts';
import { defaultStateDir, findStateDir } from '../../../src/agent/settings/state-dir.ts';
import { DEFAULT_SOCKET } from '../../../src/api/socket.ts';
import { DEFAULT_JOURNAL_DIR } from '../../../src/cni/journal-dir.ts';
import { DEFAULT_NETNS_DIRS } from '../../../src/sources/netns.ts';
import { tempDir } from '../../helpers/processes.ts';

describe('agent options', () => {
  it('uses the system paths as root', () => {
    const o = resolveAgentOptions({ stateDir: tempDir() }, {}, 0, '/');
    assert.equal(o.socket, '/run/warren/warren.sock');
    assert.equal(o.synchronous, 'FULL');
  });

  it('takes a flag over its environment variable, and the variable over the default', () => {
    const dir = tempDir();
    const env = {
      WARREN_STATE_DIR: dir,
      WARREN_SOCKET: '/tmp/env.sock',
      WARREN_NODE_NAME: 'from-env',
      WARREN_SYNC: 'normal',
    };
    const o = resolveAgentOptions({ socket: '/tmp/flag.sock' }, env, 1000, '/');
    assert.equal(o.socket, '/tmp/flag.sock');
    assert.equal(o.stateDir, dir);
    assert.equal(o.database, join(dir, 'warren.db'));
    assert.equal(o.nodeName, 'from-env');
    assert.equal(o.synchronous, 'NORMAL');
  });

  it('puts a non-root user under the XDG state directory, else home, else the working directory', () => {
    const base = tempDir();
    assert.equal(defaultStateDir({ XDG_STATE_HOME: join(base, 'xdg') }, 1000, base), join(base, 'xdg', 'warren'));
    assert.equal(
      defaultStateDir({ HOME: join(base, 'home') }, 1000, base),
      join(base, 'home', '.local', 'state', 'warren'),
    );
    const locked = join(base, 'locked');
    mkdirSync(locked);
    chmodSync(locked, 0o500);
    // root ignores permission bits, so only an unwritable path proves the fallback: use a file as HOME.
    assert.equal(defaultStateDir({ HOME: '/proc/self/status' }, 1000, base), join(base, '.warren'));
  });

  it('names the setting that is wrong', () => {
    const dir = tempDir();
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, synchronous: 'sometimes' }, {}, 0, '/'),
      /--sync \/ WARREN_SYNC: "SOMETIMES"/,
    );
    assert.throws(() => resolveAgentOptions({ stateDir: dir, logLevel: 'loud' }, {}, 0, '/'), /--log-level/);
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, socket: `/tmp/${'x'.repeat(120)}.sock` }, {}, 0, '/'),
      /longer than 107 bytes/,
    );
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, store: 'redis' }, {}, 0, '/'),
      /--store \/ WARREN_STORE: "redis"/,
    );
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, store: 'etcd' }, {}, 0, '/'),
      /--store etcd needs --etcd-endpoints/,
    );
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, store: 'etcd', etcdEndpoints: '127.0.0.1:2379' }, {}, 0, '/'),
      /"127\.0\.0\.1:2379" is not http/,
    );
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, etcdPrefix: 'warren' }, {}, 0, '/'),
      /--etcd-prefix: "warren" must start and end with \//,
    );
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, kubernetes: 'yes' }, {}, 0, '/'),
      /--kubernetes \/ WARREN_KUBERNETES: "yes" is not on or off/,
    );
    assert.throws(() => resolveAgentOptions({ stateDir: dir, nodeLeaseSeconds: '1' }, {}, 0, '/'), /--node-lease/);
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, containerdNamespaces: 'k8s.io,bad/ns' }, {}, 0, '/'),
      /"bad\/ns" is not a containerd namespace/,
    );
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, containerdNamespaces: ' , ' }, {}, 0, '/'),
      /at least one namespace/,
    );
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, containerd: 'maybe' }, {}, 0, '/'),
      /--containerd \/ WARREN_CONTAINERD: "maybe"/,
    );
    assert.throws(
      () => resolveAgentOptions({ stateDir: dir, eventRetrySeconds: '10', eventRetryMaxSeconds: '5' }, {}, 0, '/'),
      /--event-retry-max \(5\) is shorter/,
    );
  });

  it('reads the etcd settings from flags or the environment', () => {
    const dir = tempDir();
    const o = resolveAgentOptions(
      { stateDir: dir, store: 'etcd' },
      {
        WARREN_ETCD_ENDPOINTS: 'http://127.0.0.1:2379, https://10.0.0.2:2379',
        WARREN_ETCD_CA: 'ca.pem',
        WARREN_BLOCK_GRACE: '60',
      },
      0,
      '/etc/warren',
    );
    assert.equal(o.store, 'etcd');
    assert.deepEqual(o.etcdEndpoints, ['http://127.0.0.1:2379', 'https://10.0.0.2:2379']);
    assert.equal(o.etcdPrefix, '/warren/');
    assert.equal(o.etcdCa, '/etc/warren/ca.pem');
    assert.equal(o.blockGraceSeconds, 60);
    assert.equal(resolveAgentOptions({ stateDir: dir }, {}, 0, '/').store, 'sqlite');
    const c = resolveAgentOptions({ stateDir: dir }, { WARREN_CONTAINERD_NAMESPACES: 'k8s.io, moby' }, 0, '/');
    assert.deepEqual(
      [
        c.containerd,
        c.containerdSocket,
        c.containerdNamespaces,
        c.containerdGraceSeconds,
        c.eventRetrySeconds,
        c.eventRetryMaxSeconds,
      ],
      [true, '/run/containerd/containerd.sock', ['k8s.io', 'moby'], 60, 1, 300],
    );
  });
  it('as root, --state-dir does not move the journal away from where the plugin writes (issue 10)', () => {
    const dir = tempDir();
    assert.equal(resolveAgentOptions({ stateDir: dir }, {}, 0, '/').journalDir, DEFAULT_JOURNAL_DIR);
    assert.equal(resolveAgentOptions({}, { WARREN_STATE_DIR: dir }, 0, '/').journalDir, DEFAULT_JOURNAL_DIR);
    // Only an explicit journal moves it, as a config's journal_dir moves the plugin's.
    assert.equal(resolveAgentOptions({ stateDir: dir, journalDir: 'j' }, {}, 0, '/srv').journalDir, '/srv/j');
    assert.equal(
      resolveAgentOptions({ stateDir: dir }, { WARREN_JOURNAL_DIR: '/srv/env-journal' }, 0, '/').journalDir,
      '/srv/env-journal',
    );
  });

  it('as another user keeps the journal under the state directory, and the help says configs must then name it', () => {
    const dir = tempDir();
    assert.equal(resolveAgentOptions({ stateDir: dir }, {}, 1000, '/').journalDir, join(dir, 'journal'));
    const help = SETTINGS.journalDir.help;
    assert.ok(help.includes(`${DEFAULT_JOURNAL_DIR} as root whatever --state-dir says`), help);
    assert.match(
      help,
      /<state-dir>\/journal as another user \(network configs must then name it in ipam\.journal_dir\)/,
    );
  });

  it("covers podman's /run/netns and containerd's /var/run/netns by default, once each (issue 10)", () => {
    const dir = tempDir();
    assert.deepEqual(DEFAULT_NETNS_DIRS, ['/run/netns', '/var/run/netns']);
    assert.deepEqual(resolveAgentOptions({ stateDir: dir }, {}, 0, '/').netnsDirs, ['/run/netns', '/var/run/netns']);
    assert.ok(SETTINGS.netnsDirs.help.includes('default /run/netns,/var/run/netns'), SETTINGS.netnsDirs.help);
    assert.deepEqual(
      resolveAgentOptions({ stateDir: dir, netnsDirs: '/run/netns, /run/netns/, /var/run/netns' }, {}, 0, '/')
        .netnsDirs,
      ['/run/netns', '/var/run/netns'],
    );
    assert.deepEqual(resolveAgentOptions({ stateDir: dir, netnsDirs: '' }, {}, 0, '/').netnsDirs, []);
  });

  it('takes every default from the one table that --help is made of', () => {
    const dir = tempDir();
    for (const uid of [0, 1000]) {
      const o = resolveAgentOptions({ stateDir: dir }, {}, uid, '/');
      const context = { uid, env: {}, cwd: '/', stateDir: () => dir };
      for (const [key, setting] of Object.entries(SETTINGS) as Array<
        [keyof AgentOptions, (typeof SETTINGS)[keyof AgentOptions]]
      >) {
        if (!('default' in setting) || key === 'stateDir') continue;
        const text = typeof setting.default === 'string' ? setting.default : setting.default.of(context);
        const said = typeof setting.default === 'string' ? setting.default : setting.default.says;
        assert.ok(setting.help.endsWith(`; default ${said}`), `${key}: ${setting.help}`);
        const expected = resolveAgentOptions({ stateDir: dir, [key]: text }, {}, uid, '/')[key];
        assert.deepEqual(o[key], expected, `${key}: the default (${text}) resolves as the same flag would`);
      }
    }
    assert.equal(resolveAgentOptions({ stateDir: dir }, {}, 0, '/').reconcileIntervalSeconds, 10);
    assert.equal(resolveAgentOptions({ stateDir: dir }, {}, 0, '/').logLevel, 'info');
    assert.ok(!('default' in SETTINGS.etcdEndpoints));
  });

  it('times the cluster chores by their own setting, 10 s as before, whatever the reconcile interval', () => {
    const dir = tempDir();
    const o = (flags: Parameters<typeof resolveAgentOptions>[0], env: NodeJS.ProcessEnv = {}) =>
      resolveAgentOptions({ stateDir: dir, ...flags }, env, 0, '/');
    assert.equal(o({}).upkeepIntervalSeconds, 10);
    assert.equal(
      o({}).upkeepIntervalSeconds,
      o({}).reconcileIntervalSeconds,
      'the default is what the chores ran at when they shared the reconcile interval',
    );
    assert.deepEqual(
      [
        o({ reconcileIntervalSeconds: '1' }).upkeepIntervalSeconds,
        o({ upkeepIntervalSeconds: '2' }).reconcileIntervalSeconds,
      ],
      [10, 10],
      'neither follows the other',
    );
    assert.equal(o({ upkeepIntervalSeconds: '0.5' }).upkeepIntervalSeconds, 0.5);
    assert.equal(o({}, { WARREN_UPKEEP_INTERVAL: '30' }).upkeepIntervalSeconds, 30);
    assert.equal(
      o({ upkeepIntervalSeconds: '3' }, { WARREN_UPKEEP_INTERVAL: '30' }).upkeepIntervalSeconds,
      3,
      'the flag over the variable',
    );
    for (const bad of ['0', '-1', 'soon', '86401']) {
      assert.throws(
        () => o({ upkeepIntervalSeconds: bad }),
        /--upkeep-interval \/ WARREN_UPKEEP_INTERVAL: ".*" is not a number of seconds/,
        bad,
      );
    }
    assert.match(SETTINGS.upkeepIntervalSeconds.help, /cluster chores.*; default 10$/);
  });

  it('puts the plugins directory beside the socket actually used, and turns the registry off when it is empty', () => {
    const dir = tempDir();
    assert.equal(resolveAgentOptions({ stateDir: dir }, {}, 0, '/').pluginsDir, '/run/warren/plugins');
    assert.equal(
      resolveAgentOptions({ stateDir: dir, socket: join(dir, 'a', 'w.sock') }, {}, 0, '/').pluginsDir,
      join(dir, 'a', 'plugins'),
      'a private socket gets a private registry',
    );
    assert.equal(resolveAgentOptions({ stateDir: dir, pluginsDir: 'p' }, {}, 0, dir).pluginsDir, join(dir, 'p'));
    assert.equal(resolveAgentOptions({ stateDir: dir }, { WARREN_PLUGINS_DIR: '' }, 0, '/').pluginsDir, undefined);
    assert.equal(resolveAgentOptions({ stateDir: dir, pluginsDir: '' }, {}, 0, '/').pluginsDir, undefined);
  });

  it('finds the socket by one rule for the agent and the CLI: flag, WARREN_SOCKET, then the default', () => {
    const unused = (): string => assert.fail('the state directory is not asked for');
    const context = (uid: number, env: NodeJS.ProcessEnv, stateDir: () => string = unused) => ({
      uid,
      env,
      cwd: '/',
      stateDir,
    });
    assert.equal(agentSocket('/tmp/flag.sock', context(1000, { WARREN_SOCKET: '/tmp/env.sock' })), '/tmp/flag.sock');
    assert.equal(agentSocket(undefined, context(1000, { WARREN_SOCKET: '/tmp/env.sock' })), '/tmp/env.sock');
    assert.equal(agentSocket(undefined, context(0, { WARREN_SOCKET: '' })), DEFAULT_SOCKET);
    assert.equal(
      agentSocket(
        undefined,
        context(1000, {}, () => '/srv/state'),
      ),
      '/srv/state/warren.sock',
    );
    const dir = tempDir();
    assert.equal(
      resolveAgentOptions({ stateDir: dir }, {}, 1000, '/').socket,
      agentSocket(
        undefined,
        context(1000, {}, () => dir),
      ),
    );
  });

  it('reads every setting through its own row: its flag over its variable, its variable over its default', () => {
    const dir = tempDir();
    const context = { uid: 0, env: {}, cwd: '/', stateDir: () => dir };
    const defaults = resolveAgentOptions({ stateDir: dir }, {}, 0, '/');
    for (const key of SETTING_KEYS.filter((k) => k !== 'stateDir')) {
      type Rule = { of: (c: typeof context) => string };
      const setting: { flag: string; env: string; default?: string | Rule } = SETTINGS[key];
      const env = { [setting.env]: 'x-bad' };
      // The variable is read: a value it may not have is refused naming the setting, any other one is taken.
      let fromEnv: unknown;
      try {
        fromEnv = resolveAgentOptions({ stateDir: dir }, env, 0, '/')[key];
      } catch (error) {
        assert.ok(String(error).includes(`--${setting.flag}`), `${key}: ${String(error)}`);
        fromEnv = error;
      }
      assert.notDeepEqual(fromEnv, defaults[key], `${key}: ${setting.env} is read`);
      if (setting.default === undefined) continue;
      const text = typeof setting.default === 'string' ? setting.default : setting.default.of(context);
      // The flag wins: the variable's value is not even read.
      const flagged = resolveAgentOptions({ stateDir: dir, [key]: text }, env, 0, '/');
      assert.deepEqual(flagged[key], defaults[key], `${key}: the flag wins`);
    }
  });

  it('gives every row of the table an option, and nothing else (the options type is derived from the rows)', () => {
    const dir = tempDir();
    const files = { etcdCa: 'ca', etcdCert: 'c', etcdKey: 'k', kubeconfig: 'k', readinessIndicatorFile: 'r' };
    const o = resolveAgentOptions({ stateDir: dir, primaryConfig: 'p', ...files }, {}, 0, '/');
    assert.deepEqual(Object.keys(o).sort(), [...SETTING_KEYS].sort());
    assert.deepEqual(Object.keys(SETTINGS), SETTING_KEYS);
    // Left out, an optional setting is absent, not undefined.
    assert.ok(!('etcdCa' in resolveAgentOptions({ stateDir: dir }, {}, 0, '/')));
  });

  it('ships no setting only the benchmark uses: --blocks / WARREN_BLOCKS are gone (issue 25)', () => {
    assert.ok(!Object.values(SETTINGS).some((s) => s.flag === 'blocks' || s.env === 'WARREN_BLOCKS'));
    assert.ok(!('blocks' in resolveAgentOptions({ stateDir: tempDir() }, { WARREN_BLOCKS: 'off' }, 0, '/')));
  });

  it('keeps the settings files free of import cycles: the table knows nothing of the options read from it', () => {
    const folder = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'src', 'agent', 'settings');
    const imports = new Map<string, string[]>();
    for (const file of readdirSync(folder).filter((f) => f.endsWith('.ts'))) {
      const text = readFileSync(join(folder, file), 'utf8');
      imports.set(
        file,
        [...text.matchAll(/from '\.\/([\w-]+\.ts)'/g)].map((m) => m[1] as string),
      );
    }
    assert.ok(imports.get('table.ts')?.length, 'the table imports its readers');
    assert.ok(!imports.get('table.ts')?.includes('options.ts'));
    const reaches = (from: string, to: string, seen = new Set<string>()): boolean =>
      (imports.get(from) ?? []).some((next) => {
        if (next === to) return true;
        if (seen.has(next)) return false;
        seen.add(next);
        return reaches(next, to, seen);
      });
    for (const file of imports.keys()) assert.ok(!reaches(file, file), `${file} imports itself through the others`);
  });

  it('lets the CLI find a state directory without creating one', () => {
    const base = tempDir();
    const env = { XDG_STATE_HOME: join(base, 'xdg') };
    assert.equal(findStateDir(env, 1000, base), join(base, 'xdg', 'warren'));
    assert.equal(existsSync(join(base, 'xdg')), false);
    assert.equal(findStateDir({ HOME: '/proc/self/status' }, 1000, base), join(base, '.warren'));
    assert.equal(existsSync(join(base, '.warren')), false);
    // Where the agent makes it, the CLI finds it.
    assert.equal(findStateDir(env, 1000, base), defaultStateDir(env, 1000, base));
  });
});

describe('--metrics-address', () => {
  it('takes host:port and [IPv6]:port, port 0 included, and turns metrics off when empty', () => {
    assert.deepEqual(metricsAddressOf('127.0.0.1:9464'), { metricsAddress: { host: '127.0.0.1', port: 9464 } });
    assert.deepEqual(metricsAddressOf('[::1]:0'), { metricsAddress: { host: '::1', port: 0 } });
    assert.deepEqual(metricsAddressOf('node-1.example:80'), { metricsAddress: { host: 'node-1.example', port: 80 } });
    assert.deepEqual(metricsAddressOf(''), {});
    assert.deepEqual(metricsAddressOf('  '), {});
    assert.equal(formatListenAddress({ host: '::1', port: 9464 }), '[::1]:9464');
  });

  it('refuses an address without a port, with a port past 65535, or an unbracketed IPv6 address, naming the flag', () => {
    for (const bad of ['127.0.0.1', '127.0.0.1:65536', '::1:9464', ':9464', 'host:port', '127.0.0.1:94 64']) {
      assert.throws(
        () => metricsAddressOf(bad),
        /--metrics-address \/ WARREN_METRICS_ADDRESS: ".*" is not host:port/,
        bad,
      );
    }
  });

  it('defaults to loopback port 9464, and an empty environment variable turns metrics off', () => {
    const dir = tempDir();
    assert.deepEqual(resolveAgentOptions({ stateDir: dir }, {}, 0, '/').metricsAddress, {
      host: '127.0.0.1',
      port: 9464,
    });
    assert.equal(
      resolveAgentOptions({ stateDir: dir }, { WARREN_METRICS_ADDRESS: '' }, 0, '/').metricsAddress,
      undefined,
    );
  });
});
