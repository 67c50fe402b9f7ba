/**
 * `warren doctor`'s judgement as a table: an observation of the node (the agent's facts, the
 * plugin in the bin dirs, the configs in the conf dir) in, findings out. A node set up right has
 * no warning or error; each misconfiguration is named by its id, with its severity and a fix.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DoctorFacts } from '../../../src/api/doctor.ts';
import { DEFAULT_SOCKET } from '../../../src/api/socket.ts';
import { DEFAULT_JOURNAL_DIR } from '../../../src/cni/journal-dir.ts';
import { diagnose } from '../../../src/cli/doctor/checks.ts';
import type { ConfDirScan, WarrenConfig, WarrenConfigReading } from '../../../src/cli/doctor/conf-dir.ts';
import { type Finding, exitCodeOf } from '../../../src/cli/doctor/finding.ts';
import type { NodeObservation } from '../../../src/cli/doctor/observation.ts';
import type { InstalledFileState, PluginInstall } from '../../../src/cli/doctor/plugin-install.ts';

const VERSION = '1.2.3';
const OK: InstalledFileState = { kind: 'ok' };

function facts(over: Partial<DoctorFacts> = {}): DoctorFacts {
  return {
    node: 'node-a',
    version: VERSION,
    pid: 42,
    socket: DEFAULT_SOCKET,
    stateDir: '/var/lib/warren',
    journalDir: DEFAULT_JOURNAL_DIR,
    cniConfDir: '/etc/cni/net.d',
    manageCniConfig: false,
    metrics: { address: '127.0.0.1:9464' },
    store: { kind: 'sqlite', description: 'sqlite:/var/lib/warren/warren.db', healthy: true, synchronous: 'FULL' },
    netns: [{ dir: '/run/netns', observable: true }],
    recordedNetns: [{ dir: '/run/netns', allocations: 3, example: '/run/netns/cni-1' }],
    ...over,
  };
}

const parsed = (over: Partial<Extract<WarrenConfigReading, { kind: 'parsed' }>> = {}): WarrenConfigReading => ({
  kind: 'parsed',
  network: 'podnet',
  ignoredKeys: [],
  ...over,
});
const config = (reading: WarrenConfigReading = parsed()): WarrenConfig => ({
  file: '/etc/cni/net.d/10-podnet.conflist',
  plugin: 0,
  reading,
});
const scan = (over: Partial<ConfDirScan> = {}): ConfDirScan => ({
  dir: '/etc/cni/net.d',
  listing: { kind: 'listed' },
  configs: [config()],
  malformed: [],
  others: [],
  ...over,
});
const install = (binDir: string, over: Partial<PluginInstall> = {}): PluginInstall => ({
  binDir,
  forwarder: OK,
  node: OK,
  bundle: OK,
  ...over,
});

function node(
  over: { readonly [K in keyof NodeObservation]?: NodeObservation[K] | undefined } = {},
  agentFacts: DoctorFacts = facts(),
): NodeObservation {
  return {
    agent: { kind: 'reached', socket: agentFacts.socket, facts: agentFacts },
    doctorVersion: VERSION,
    containerdConfig: {
      kind: 'read',
      path: '/etc/containerd/config.toml',
      files: ['/etc/containerd/config.toml'],
      settings: {
        binDirs: ['/opt/cni/bin'],
        confDir: '/etc/cni/net.d',
        grpcAddress: '/run/containerd/containerd.sock',
      },
    },
    binDirs: { from: 'containerd-config', installs: [install('/opt/cni/bin')] },
    confDir: { from: 'containerd-config', scan: scan() },
    journalDir: { dir: agentFacts.journalDir },
    ...over,
  } as NodeObservation;
}

/** The findings that are not ok, as `id:severity`. */
const problems = (findings: readonly Finding[]) =>
  findings.filter((f) => f.severity !== 'ok').map((f) => `${f.id}:${f.severity}`);
const find = (findings: readonly Finding[], id: string) => {
  const f = findings.find((x) => x.id === id);
  assert.ok(f, `a finding ${id} in ${JSON.stringify(findings.map((x) => x.id))}`);
  return f;
};

describe('doctor checks', () => {
  it('finds nothing wrong on a node set up right, and says what it checked', () => {
    const findings = diagnose(node());
    assert.deepEqual(problems(findings), []);
    assert.equal(exitCodeOf(findings), 0);
    for (const id of [
      'socket-reachable',
      'containerd-config-read',
      'plugin-installed',
      'config-agrees',
      'journal-dir-usable',
      'netns-dir-observable',
      'store-healthy',
      'store-durable',
      'metrics-served',
    ])
      find(findings, id);
  });

  const cases: ReadonlyArray<{ name: string; node: NodeObservation; expect: string[]; fix?: RegExp }> = [
    {
      name: 'the plugin is in no bin dir',
      node: node({
        binDirs: {
          from: 'flag',
          installs: [
            install('/opt/cni/bin', { forwarder: { kind: 'missing', reason: '/opt/cni/bin/warren does not exist' } }),
          ],
        },
      }),
      expect: ['plugin-missing:error'],
      fix: /^warren install --cni-bin-dir \/opt\/cni\/bin$/,
    },
    {
      name: 'the plugin is found in a later bin dir',
      node: node({
        binDirs: {
          from: 'flag',
          installs: [install('/a', { forwarder: { kind: 'missing', reason: 'none' } }), install('/b')],
        },
      }),
      expect: [],
    },
    {
      name: 'the plugin cannot be run',
      node: node({
        binDirs: {
          from: 'flag',
          installs: [
            install('/a', { forwarder: { kind: 'unusable', reason: '/a/warren is not executable (mode 644)' } }),
          ],
        },
      }),
      expect: ['plugin-not-executable:error'],
      fix: /warren install --cni-bin-dir \/a/,
    },
    {
      name: "the plugin's fallback is missing",
      node: node({
        binDirs: {
          from: 'flag',
          installs: [install('/a', { bundle: { kind: 'missing', reason: '/a/warren.d/warren.cjs does not exist' } })],
        },
      }),
      expect: ['plugin-fallback-missing:error'],
      fix: /warren install/,
    },
    {
      name: "a config's socket differs from the agent's",
      node: node({
        confDir: { from: 'flag', scan: scan({ configs: [config(parsed({ socket: '/run/other.sock' }))] }) },
      }),
      expect: ['config-socket-mismatch:error'],
      fix: /"socket": "\/run\/warren\/warren\.sock".*--socket \/run\/other\.sock/,
    },
    {
      name: 'a config names no socket and the agent listens away from the default',
      node: node({}, facts({ socket: '/tmp/agent.sock' })),
      expect: ['config-socket-mismatch:error'],
      fix: /"socket": "\/tmp\/agent\.sock"/,
    },
    {
      name: "a config's journal dir differs from the agent's",
      node: node({
        confDir: { from: 'flag', scan: scan({ configs: [config(parsed({ journalDir: '/var/lib/other' }))] }) },
      }),
      expect: ['journal-dir-mismatch:error'],
      fix: /"journal_dir": "\/var\/lib\/warren\/journal".*--journal-dir \/var\/lib\/other/,
    },
    {
      name: "the plugin default journal dir differs from the agent's",
      node: node({}, facts({ journalDir: '/srv/journal' })),
      expect: ['journal-dir-mismatch:error'],
      fix: /"journal_dir": "\/srv\/journal"/,
    },
    {
      name: "a config's store differs from the agent's",
      node: node({ confDir: { from: 'flag', scan: scan({ configs: [config(parsed({ store: 'etcd' }))] }) } }),
      expect: ['config-store-mismatch:error'],
      fix: /--store etcd/,
    },
    {
      name: 'a config naming warren is refused',
      node: node({
        confDir: {
          from: 'flag',
          scan: scan({ configs: [config({ kind: 'refused', message: 'ipam.range: "x" is not a CIDR' })] }),
        },
      }),
      expect: ['config-invalid:error'],
      fix: /edit \/etc\/cni\/net\.d\/10-podnet\.conflist/,
    },
    {
      name: 'no config names warren',
      node: node({ confDir: { from: 'flag', scan: scan({ configs: [], others: ['/etc/cni/net.d/10-bridge.conf'] }) } }),
      expect: ['no-warren-config:warning'],
      fix: /--manage-cni-config on/,
    },
    {
      name: 'the conf dir does not exist',
      node: node({ confDir: { from: 'flag', scan: scan({ listing: { kind: 'missing' }, configs: [] }) } }),
      expect: ['no-warren-config:warning'],
    },
    {
      name: 'a malformed file mentions warren',
      node: node({
        confDir: {
          from: 'flag',
          scan: scan({
            malformed: [
              {
                file: '/etc/cni/net.d/05-x.conf',
                reason: 'is not a network config: Unexpected token',
                mentionsWarren: true,
              },
            ],
          }),
        },
      }),
      expect: ['config-malformed:error'],
      fix: /fix or remove \/etc\/cni\/net\.d\/05-x\.conf/,
    },
    {
      name: 'a malformed file says nothing of warren',
      node: node({
        confDir: {
          from: 'flag',
          scan: scan({
            malformed: [{ file: '/etc/cni/net.d/05-x.conf', reason: 'is not a network config', mentionsWarren: false }],
          }),
        },
      }),
      expect: ['config-malformed:warning'],
    },
    {
      name: 'the journal dir is refused',
      node: node({
        journalDir: { dir: DEFAULT_JOURNAL_DIR, problem: 'is writable by its group or others (mode 777)' },
      }),
      expect: ['journal-dir-unusable:error'],
      fix: /chmod 0700/,
    },
    {
      name: 'a netns dir with allocations under it is not observable',
      node: node({}, facts({ netns: [{ dir: '/run/netns', observable: false, reason: 'not a mount point' }] })),
      expect: ['netns-dir-unobservable:error'],
      fix: /mountPropagation: HostToContainer/,
    },
    {
      name: 'a netns dir with nothing under it is not observable',
      node: node(
        {},
        facts({ netns: [{ dir: '/run/netns', observable: false, reason: 'missing' }], recordedNetns: [] }),
      ),
      expect: ['netns-dir-unobservable:warning'],
    },
    {
      name: 'allocations recorded namespaces outside every observed dir',
      node: node({}, facts({ recordedNetns: [{ allocations: 2, example: '/var/run/other/ns-1' }] })),
      expect: ['netns-outside-observed-dirs:warning'],
      fix: /--netns-dirs \(\/var\/run\/other\)/,
    },
    {
      name: 'allocations recorded no namespace',
      node: node({}, facts({ recordedNetns: [{ unrecorded: true, allocations: 2 }] })),
      expect: [],
    },
    {
      name: 'containerd is not reachable',
      node: node(
        {},
        facts({
          containerd: { socket: '/run/containerd/containerd.sock', state: 'waiting-for-socket', lastError: 'ENOENT' },
        }),
      ),
      expect: ['containerd-unreachable:warning'],
      fix: /--containerd-socket PATH/,
    },
    {
      name: 'the containerd source has stopped',
      node: node({}, facts({ containerd: { socket: '/run/containerd/containerd.sock', state: 'stopped' } })),
      expect: ['containerd-stopped:error'],
    },
    {
      name: 'the store is unhealthy',
      node: node(
        {},
        facts({
          store: {
            kind: 'sqlite',
            description: 'sqlite:x',
            healthy: false,
            error: 'disk I/O error',
            synchronous: 'FULL',
          },
        }),
      ),
      expect: ['store-unhealthy:error'],
    },
    {
      name: 'the store commits with NORMAL',
      node: node(
        {},
        facts({ store: { kind: 'sqlite', description: 'sqlite:x', healthy: true, synchronous: 'NORMAL' } }),
      ),
      expect: ['store-durability-normal:warning'],
      fix: /--sync FULL/,
    },
    {
      name: 'the clock is 3 s off etcd',
      node: node({}, facts({ clockSkew: { endpoint: 'http://etcd:2379', skewMs: -3_800, resolutionMs: 600 } })),
      expect: ['clock-skew:warning'],
      fix: /timedatectl set-ntp true/,
    },
    {
      name: 'the clock is within its resolution of etcd',
      node: node({}, facts({ clockSkew: { endpoint: 'http://etcd:2379', skewMs: 2_400, resolutionMs: 600 } })),
      expect: [],
    },
    {
      name: 'the clock is off by more than a lease',
      node: node({}, facts({ clockSkew: { endpoint: 'http://etcd:2379', skewMs: 12_000, resolutionMs: 600 } })),
      expect: ['clock-skew-beyond-lease:error'],
    },
    {
      name: 'the clock cannot be measured',
      node: node({}, facts({ clockSkew: { endpoint: 'http://etcd:2379', error: 'connect ECONNREFUSED' } })),
      expect: ['clock-skew-unmeasured:warning'],
    },
    {
      name: 'the metrics address cannot be bound',
      node: node({}, facts({ metrics: { address: '127.0.0.1:9464', error: 'EADDRINUSE' } })),
      expect: ['metrics-unavailable:warning'],
      fix: /--metrics-address HOST:PORT/,
    },
    {
      name: "containerd's config cannot be read",
      node: node({ containerdConfig: { kind: 'unreadable', path: '/etc/containerd/config.toml', reason: 'not TOML' } }),
      expect: ['containerd-config-unreadable:warning'],
      fix: /--cni-bin-dir DIR/,
    },
    {
      name: 'the agent writes its config where containerd does not read',
      node: node({}, facts({ manageCniConfig: true, cniConfDir: '/etc/cni/other' })),
      expect: ['cni-conf-dir-mismatch:warning'],
      fix: /--cni-conf-dir \/etc\/cni\/net\.d/,
    },
    {
      name: 'the agent runs another version',
      node: node({}, facts({ version: '0.9.0' })),
      expect: ['agent-version-differs:warning'],
    },
    {
      name: "the agent's CNI config manager failed",
      node: node(
        {},
        facts({
          manageCniConfig: true,
          cniConfig: {
            state: 'failed',
            output: '/etc/cni/net.d/00-warren.conflist',
            problem: 'the CNI config pass failed: Maximum call stack size exceeded',
          },
        }),
      ),
      expect: ['cni-config-failed:error'],
      fix: /tries again on every change/,
    },
    {
      name: "the agent's CNI config is current",
      node: node(
        {},
        facts({ manageCniConfig: true, cniConfig: { state: 'current', output: '/etc/cni/net.d/00-warren.conflist' } }),
      ),
      expect: [],
    },
  ];
  for (const c of cases) {
    it(`finds ${c.expect.length === 0 ? 'nothing wrong' : c.expect.join(', ')} when ${c.name}`, () => {
      const findings = diagnose(c.node);
      assert.deepEqual(problems(findings), c.expect);
      assert.equal(exitCodeOf(findings), c.expect.some((e) => e.endsWith(':error')) ? 1 : 0);
      for (const f of findings)
        if (f.severity !== 'ok') assert.ok(f.fix !== undefined && f.fix.length > 0, `${f.id} states a fix`);
      if (c.fix !== undefined) assert.match(find(findings, (c.expect[0] ?? '').split(':')[0] ?? '').fix ?? '', c.fix);
    });
  }

  it('never says configs were read (✓) from a conf dir that does not exist or cannot be listed', () => {
    for (const listing of [{ kind: 'missing' as const }, { kind: 'unreadable' as const, reason: 'EACCES' }]) {
      const findings = diagnose(node({ confDir: { from: 'flag', scan: scan({ listing, configs: [] }) } }));
      assert.ok(
        !findings.some((f) => f.id === 'cni-conf-dir' && f.severity === 'ok'),
        `${listing.kind}: ${JSON.stringify(findings.map((f) => `${f.id}:${f.severity}`))}`,
      );
    }
    const listed = diagnose(node({}));
    assert.equal(find(listed, 'cni-conf-dir').severity, 'ok');
  });

  it('judges the files alone when the agent does not answer, and names the fix for that first', () => {
    const findings = diagnose(
      node({
        agent: {
          kind: 'unreachable',
          socket: '/run/warren/warren.sock',
          reason: 'Warren agent at /run/warren/warren.sock is not reachable: ENOENT',
        },
        journalDir: undefined,
      }),
    );
    assert.deepEqual(problems(findings), ['socket-unreachable:error']);
    assert.equal(findings[0]?.id, 'socket-unreachable');
    assert.match(findings[0]?.fix ?? '', /start the agent.*--socket PATH/);
    // The files are still judged: the plugin and the config (without the agent to compare with).
    find(findings, 'plugin-installed');
    assert.match(find(findings, 'config-parses').detail, /socket \/run\/warren\/warren\.sock \(the default\)/);
    assert.ok(
      !findings.some((f) => f.id.startsWith('store') || f.id.startsWith('netns')),
      'no check that needs the agent',
    );
  });

  it('names the nodes whose old-layout etcd blocks are left, as a warning saying how they go', () => {
    const store = {
      kind: 'etcd' as const,
      description: 'etcd',
      healthy: true,
      etcdEndpoints: ['http://10.0.0.1:2379'],
      legacy: { blocks: { n2: 3, n7: 1 }, ranges: 2 },
    };
    const f = find(diagnose(node({}, facts({ store }))), 'etcd-legacy-data');
    assert.equal(f.severity, 'warning');
    assert.match(f.detail ?? '', /old blocks of nodes n2 \(3\), n7 \(1\), 2 old range documents/);
    assert.match(f.fix ?? '', /delete its Node/);
    assert.ok(
      !diagnose(node({}, facts({ store: { ...store, legacy: undefined } as never }))).some(
        (x) => x.id === 'etcd-legacy-data',
      ),
      'none once every old block moved',
    );
  });

  it('tells an agent too old to report its setup to be upgraded', () => {
    const findings = diagnose(
      node({
        agent: { kind: 'refused', socket: '/s', code: 'NOT_FOUND', reason: 'no route GET /v1/doctor' },
        journalDir: undefined,
      }),
    );
    assert.deepEqual(problems(findings), ['agent-refused:error']);
    assert.match(
      find(findings, 'agent-refused').fix ?? '',
      new RegExp(`upgrade the agent to version ${VERSION.replace(/\./g, '\\.')}`),
    );
  });

  it('tells to upgrade on an HTTP 404 it cannot read, by the status and not the words', () => {
    const reason = 'Warren agent at /s answered HTTP 404 without an error';
    for (const refused of [
      { reason, httpStatus: 404 },
      { reason: 'no such page', httpStatus: 404 },
    ]) {
      const agent = { kind: 'refused', socket: '/s', code: 'IO_FAILURE', ...refused } as const;
      const fix = find(diagnose(node({ agent, journalDir: undefined })), 'agent-refused').fix ?? '';
      assert.match(fix, /upgrade the agent/, refused.reason);
    }
  });

  it('does not take a refusal whose message merely contains "404" for an agent too old', () => {
    const reason = 'the store is unhealthy: pool 10.0.4.0/24: commit 404 of 410 failed';
    const agent = { kind: 'refused', socket: '/s', code: 'INTERNAL', reason, httpStatus: 500 } as const;
    const fix = find(diagnose(node({ agent, journalDir: undefined })), 'agent-refused').fix ?? '';
    assert.doesNotMatch(fix, /upgrade/);
    assert.match(fix, /warren status/);
  });

  it('lists the whereabouts keys a config carries that do nothing here, as information', () => {
    // Not its store keys (datastore, etcd_host, ...): those are served or flagged (store-scope.test.ts).
    const ignored = [
      { path: 'ipam.leader_lease_duration', reason: "whereabouts' own datastore" },
      { path: 'ipam.log_level', reason: 'Warren logs through the agent' },
    ];
    const findings = diagnose(
      node({ confDir: { from: 'flag', scan: scan({ configs: [config(parsed({ ignoredKeys: ignored }))] }) } }),
    );
    const f = find(findings, 'whereabouts-keys-ignored');
    assert.equal(f.severity, 'ok');
    assert.match(f.title, /2 whereabouts keys accepted and ignored/);
    assert.match(f.detail, /ipam\.leader_lease_duration \(whereabouts' own datastore\); ipam\.log_level/);
  });

  it('compares paths as the file system resolves them', () => {
    const viaVarRun = facts({ socket: '/var/run/warren/warren.sock' });
    const canonical = (p: string) => p.replace(/^\/var\/run\//, '/run/');
    assert.deepEqual(problems(diagnose(node({ canonical }, viaVarRun))), []);
    assert.deepEqual(problems(diagnose(node({}, viaVarRun))), ['config-socket-mismatch:error']);
  });

  it('says an unobservable dir holds allocations and gives an example', () => {
    const f = find(
      diagnose(
        node(
          {},
          facts({ netns: [{ dir: '/run/netns', observable: false, reason: '/run/netns is not a mount point' }] }),
        ),
      ),
      'netns-dir-unobservable',
    );
    assert.match(
      f.detail,
      /^\/run\/netns is not a mount point; 3 allocations recorded under it \(e\.g\. \/run\/netns\/cni-1\)/,
    );
  });
});
