/**
 * `warren doctor` as an operator runs it, a child process against a real agent and real dirs:
 * containerd's config (a TOML of the test's own) naming the CNI bin and conf dirs, the plugin
 * installed there by `warren install`, a conflist naming warren. A node set up right is all green
 * (exit 0), and stays green after a pod's ADD through the installed plugin; each misconfiguration
 * it knows (plugin missing, journal dir mismatch, socket unreachable, netns dir unobservable) is
 * named, with its fix, in the human output and in --json, and exits 1.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ApiClient } from '../../src/api/client.ts';
import type { Finding } from '../../src/cli/doctor/finding.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { unmountUnder } from '../helpers/mounts.ts';
import { CHILD_PATH, WARREN_BIN, isRoot, run, sh, tempDir } from '../helpers/processes.ts';

interface Report {
  readonly ok: boolean;
  readonly findings: readonly Finding[];
}

/** A conflist naming warren as a runtime would find it, for the agent behind `socket`. */
function conflist(name: string, ipam: Record<string, unknown>) {
  return {
    cniVersion: '1.0.0',
    name,
    plugins: [{ type: 'bridge', bridge: 'doc0', ipam: { type: 'warren', range: '10.231.0.0/24', ...ipam } }],
  };
}

function writeConfDir(config: unknown): string {
  const dir = tempDir('warren-doctor-conf-');
  writeFileSync(join(dir, '10-docnet.conflist'), JSON.stringify(config));
  return dir;
}

/** containerd's config (version 3) pointing at `binDir` and `confDir`. */
function containerdConfig(binDir: string, confDir: string): string {
  const path = join(tempDir('warren-doctor-ctrd-'), 'config.toml');
  writeFileSync(
    path,
    `version = 3\n[plugins."io.containerd.cri.v1.runtime".cni]\nbin_dirs = [${JSON.stringify(binDir)}]\nconf_dir = ${JSON.stringify(confDir)}\n`,
  );
  return path;
}

const doctor = (...args: string[]) => run(process.execPath, [WARREN_BIN, 'doctor', ...args]);

/** Both outputs of one check: the human one and the --json one, which must agree on the verdict. */
async function examine(...args: string[]): Promise<{ code: number | null; text: string; report: Report }> {
  const human = await doctor(...args);
  const json = await doctor(...args, '--json');
  assert.equal(json.code, human.code, `--json exits as the human output does: ${human.stdout}${human.stderr}`);
  const report = JSON.parse(json.stdout) as Report;
  assert.equal(report.ok, human.code === 0);
  return { code: human.code, text: human.stdout, report };
}

function problems(report: Report): string[] {
  return report.findings.filter((f) => f.severity !== 'ok').map((f) => `${f.id}:${f.severity}`);
}

function finding(report: Report, id: string): Finding {
  const f = report.findings.find((x) => x.id === id);
  assert.ok(f, `a finding ${id}: ${JSON.stringify(report.findings, null, 2)}`);
  return f;
}

/** The human output shows the finding's marker and title, and its fix under it. */
function assertShown(text: string, f: Finding): void {
  const marker = f.severity === 'error' ? '✗' : f.severity === 'warning' ? '!' : '✓';
  assert.ok(text.includes(`${marker} ${f.title}  [${f.id}]`), `${f.id} shown with ${marker} in:\n${text}`);
  if (f.fix !== undefined) assert.ok(text.includes(`    fix: ${f.fix}`), `the fix of ${f.id} shown in:\n${text}`);
}

describe('warren doctor on a real node', () => {
  let agent: AgentHandle;
  let binDir: string;
  let confDir: string;
  let ctrdConfig: string;
  /** An observed netns dir (a private mount point) when root; none otherwise. */
  let netnsDir: string | undefined;
  const mounted: string[] = [];

  before(async () => {
    binDir = tempDir('warren-doctor-bin-');
    const installed = await run(process.execPath, [WARREN_BIN, 'install', '--cni-bin-dir', binDir, '--link']);
    assert.equal(installed.code, 0, installed.stderr);
    if (isRoot()) {
      const dir = tempDir('warren-doctor-netns-');
      await sh('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0755', 'tmpfs', dir]);
      mounted.push(dir);
      netnsDir = dir;
    }
    agent = await startAgent({ args: netnsDir === undefined ? [] : ['--netns-dirs', netnsDir] });
    confDir = writeConfDir(conflist('docnet', { socket: agent.socket, journal_dir: join(agent.dir, 'journal') }));
    ctrdConfig = containerdConfig(binDir, confDir);
  });
  after(async () => {
    await agent?.stop();
    for (const dir of mounted) unmountUnder(dir);
  });

  it('finds a node set up right all green, exit 0, and it stays so after an ADD through the installed plugin', async () => {
    const green = await examine('--socket', agent.socket, '--containerd-config', ctrdConfig);
    assert.deepEqual(problems(green.report), []);
    assert.equal(green.code, 0, green.text);
    for (const id of [
      'socket-reachable',
      'containerd-config-read',
      'plugin-installed',
      'config-agrees',
      'journal-dir-usable',
      'store-healthy',
      'store-durable',
      'metrics-served',
    ])
      assertShown(green.text, finding(green.report, id));
    assert.match(finding(green.report, 'plugin-installed').title, new RegExp(`installed in ${binDir}`));
    assert.match(green.text, /\n0 errors, 0 warnings, \d+ ok: all well\n$/);
    assert.ok(!/^[✗!] /m.test(green.text), green.text);

    // What the doctor called right works: the runtime's call through the installed forwarder, with
    // the config from the conf dir, gets an address.
    const netns = join(netnsDir ?? '/nonexistent-netns', 'ns-green');
    if (netnsDir !== undefined) writeFileSync(netns, '');
    const add = await run(join(binDir, 'warren'), [], {
      env: {
        PATH: CHILD_PATH,
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: 'doctor-green',
        CNI_NETNS: netns,
        CNI_IFNAME: 'eth0',
        CNI_PATH: binDir,
      },
      stdin: JSON.stringify({
        cniVersion: '1.0.0',
        name: 'docnet',
        ...conflist('docnet', { socket: agent.socket, journal_dir: join(agent.dir, 'journal') }).plugins[0],
      }),
    });
    assert.equal(add.code, 0, add.stdout + add.stderr);
    if (netnsDir === undefined) return; // without root there is no observed dir to record it under
    const after = await examine('--socket', agent.socket, '--containerd-config', ctrdConfig);
    assert.deepEqual(problems(after.report), []);
    assert.match(
      finding(after.report, 'netns-dir-observable').detail,
      /^1 allocation recorded under it \(e\.g\. .*ns-green\)/,
    );
  });

  it('names a plugin missing from the bin dir the runtime uses, with the install command', async () => {
    const empty = tempDir('warren-doctor-bin-');
    const r = await examine('--socket', agent.socket, '--containerd-config', containerdConfig(empty, confDir));
    assert.equal(r.code, 1);
    assert.deepEqual(problems(r.report), ['plugin-missing:error']);
    const f = finding(r.report, 'plugin-missing');
    assert.equal(f.fix, `warren install --cni-bin-dir ${empty}`);
    assert.match(f.detail, /from containerd's config/);
    assertShown(r.text, f);
  });

  it("names a config whose journal dir is not the agent's, with both ways to agree", async () => {
    const other = join(tempDir('warren-doctor-journal-'), 'journal');
    const conf = writeConfDir(conflist('docnet', { socket: agent.socket, journal_dir: other }));
    const r = await examine('--socket', agent.socket, '--containerd-config', ctrdConfig, '--cni-conf-dir', conf);
    assert.equal(r.code, 1);
    assert.deepEqual(problems(r.report), ['journal-dir-mismatch:error']);
    const f = finding(r.report, 'journal-dir-mismatch');
    assert.equal(
      f.fix,
      `set "journal_dir": "${join(agent.dir, 'journal')}" in the ipam section of ${join(conf, '10-docnet.conflist')}, or start the agent with --journal-dir ${other}`,
    );
    assertShown(r.text, f);
  });

  it('names a socket no agent answers on, and still judges the files', async () => {
    const nowhere = join(tempDir('warren-doctor-sock-'), 'none.sock');
    const r = await examine('--socket', nowhere, '--containerd-config', ctrdConfig);
    assert.equal(r.code, 1);
    const f = finding(r.report, 'socket-unreachable');
    assert.equal(f.severity, 'error');
    assert.match(f.fix ?? '', /start the agent .*--socket PATH/);
    assertShown(r.text, f);
    assert.equal(r.report.findings[0]?.id, 'socket-unreachable');
    // The files are judged without the agent: the plugin is there and the config parses.
    assert.equal(finding(r.report, 'plugin-installed').severity, 'ok');
    assert.equal(finding(r.report, 'config-parses').severity, 'ok');
    assert.ok(!r.report.findings.some((x) => x.id.startsWith('store-')), 'no check that needs the agent');
  });

  describe('with an agent told to observe a netns dir that is not a mount point', () => {
    let plain: AgentHandle;
    let plainDir: string;
    let plainConf: string;

    before(async () => {
      plainDir = tempDir('warren-doctor-plain-');
      mkdirSync(plainDir, { recursive: true });
      plain = await startAgent({ args: ['--netns-dirs', plainDir] });
      const network = conflist('plainnet', { socket: plain.socket, journal_dir: join(plain.dir, 'journal') });
      plainConf = writeConfDir(network);
      const add = await new ApiClient({ socket: plain.socket, timeoutMs: 10_000 }).cni({
        command: 'ADD',
        containerID: 'doctor-unobserved',
        netns: join(plainDir, 'ns-1'),
        ifname: 'eth0',
        config: { cniVersion: '1.0.0', name: 'plainnet', ...network.plugins[0] },
      });
      assert.equal(add.kind, 'result', JSON.stringify(add));
    });
    after(async () => {
      await plain?.stop();
    });

    it('names the unobservable dir as an error, with the allocation under it and the mount to add', async () => {
      const r = await examine('--socket', plain.socket, '--containerd-config', ctrdConfig, '--cni-conf-dir', plainConf);
      assert.equal(r.code, 1);
      assert.deepEqual(problems(r.report), ['netns-dir-unobservable:error']);
      const f = finding(r.report, 'netns-dir-unobservable');
      assert.match(
        f.detail,
        new RegExp(`is not a mount point.*1 allocation recorded under it \\(e\\.g\\. ${plainDir}/ns-1\\)`),
      );
      assert.match(
        f.fix ?? '',
        new RegExp(
          `mount the host's ${plainDir} into the agent's container \\(a hostPath volume with mountPropagation: HostToContainer\\), or run the agent on the host`,
        ),
      );
      assertShown(r.text, f);
    });
  });
});
