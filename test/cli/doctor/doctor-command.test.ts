/**
 * `warren doctor` in process, without an agent: broken input (containerd's config not TOML, a
 * conf dir file not JSON) is a finding and never a crash; flags choose the dirs; the output is
 * escaped for a terminal; the journal dir is judged without being created; an answer that is not
 * facts is judged by its HTTP status and code, never its words. The command against a
 * real agent is test/e2e/doctor.test.ts.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { canonicalPath, inspectJournalDir, runDoctor } from '../../../src/cli/doctor/doctor-command.ts';
import type { Finding } from '../../../src/cli/doctor/finding.ts';
import { renderHuman } from '../../../src/cli/doctor/report.ts';
import { tempDir } from '../../helpers/processes.ts';

async function doctor(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const nowhere = join(tempDir('warren-doctor-cmd-'), 'none.sock');
  const code = await runDoctor(
    argv,
    { out: (t) => (out += t), err: (t) => (err += t), env: {} },
    { socketOf: (flag) => flag ?? nowhere },
  );
  return { code, out, err };
}

describe('warren doctor, the command', () => {
  it('turns a containerd config that is not TOML and a config that is not JSON into findings, not a crash', async () => {
    const dir = tempDir('warren-doctor-cmd-');
    const toml = join(dir, 'config.toml');
    writeFileSync(toml, 'version = 3\n[plugins."io.containerd.cri.v1.runtime".cni\n');
    const conf = join(dir, 'net.d');
    mkdirSync(conf);
    writeFileSync(join(conf, '10-broken.conflist'), '{"cniVersion": "1.0.0", "plugins": [{"ipam": {"type": "warren"');
    const r = await doctor(['--json', '--containerd-config', toml, '--cni-conf-dir', conf]);
    assert.equal(r.code, 1);
    const report = JSON.parse(r.out) as { ok: boolean; findings: Finding[] };
    assert.equal(report.ok, false);
    const byId = new Map(report.findings.map((f) => [f.id, f]));
    assert.equal(byId.get('socket-unreachable')?.severity, 'error');
    const ctrd = byId.get('containerd-config-unreadable');
    assert.equal(ctrd?.severity, 'warning');
    assert.match(ctrd?.detail ?? '', /is not valid TOML: .*line 2/);
    const broken = byId.get('config-malformed');
    assert.equal(broken?.severity, 'error');
    assert.match(broken?.title ?? '', /10-broken\.conflist is not a network config: /);
    // Without a readable config, the default bin dir is judged, and said to be the default.
    assert.match(
      byId.get('plugin-missing')?.detail ?? byId.get('plugin-installed')?.detail ?? '',
      /\/opt\/cni\/bin, the default: containerd's config .* cannot be read/,
    );
  });

  it('takes an HTTP 404 for an agent too old by its status, and a message saying 404 for a failure', async () => {
    const socket = join(tempDir('warren-doctor-cmd-'), 'agent.sock');
    let answer = { status: 404, body: { detail: 'not a Warren error answer' } as object };
    const server = createServer((_req, res) => {
      const text = JSON.stringify(answer.body);
      res.writeHead(answer.status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
      res.end(text);
    });
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    const fixOf = async (): Promise<string> => {
      const report = JSON.parse((await doctor(['--json', '--socket', socket])).out) as { findings: Finding[] };
      return report.findings.find((f) => f.id === 'agent-refused')?.fix ?? 'no agent-refused finding';
    };
    try {
      assert.match(await fixOf(), /upgrade the agent/);
      answer = { status: 500, body: { error: { code: 'INTERNAL', message: 'commit 404 of 410 failed' } } };
      assert.match(await fixOf(), /see `warren status`/);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('looks in every --cni-bin-dir, repeated or comma-separated, in order', async () => {
    const [a, b, c] = [tempDir(), tempDir(), tempDir()];
    const r = await doctor([
      '--json',
      '--cni-bin-dir',
      `${a},${b}`,
      '--cni-bin-dir',
      c,
      '--cni-conf-dir',
      tempDir(),
      '--containerd-config',
      join(a, 'none.toml'),
    ]);
    const missing = (JSON.parse(r.out) as { findings: Finding[] }).findings.find((f) => f.id === 'plugin-missing');
    assert.equal(missing?.title, `warren is installed in none of ${a}, ${b}, ${c}`);
    assert.equal(missing?.fix, `warren install --cni-bin-dir ${a}`);
  });

  it('prints its flags with --help, and refuses an empty --cni-bin-dir as a usage error', async () => {
    const help = await doctor(['--help']);
    assert.equal(help.code, 0);
    assert.match(help.out, /--cni-bin-dir DIR/);
    await assert.rejects(doctor(['--cni-bin-dir', '']), /--cni-bin-dir needs a directory/);
  });

  it('shows control characters from files as escapes, and counts the findings', () => {
    const text = renderHuman([
      {
        id: 'config-malformed',
        severity: 'error',
        title: 'bad\x1b[2Jname.conf is not a network config',
        detail: 'd',
        fix: 'fix or remove it',
      },
      { id: 'store-healthy', severity: 'ok', title: 'fine', detail: 'd' },
      { id: 'metrics-unavailable', severity: 'warning', title: 'no metrics', detail: 'd', fix: 'f' },
    ]);
    assert.ok(!text.includes('\x1b'));
    assert.match(
      text,
      /^✗ bad\\x1b\[2Jname\.conf is not a network config {2}\[config-malformed\]\n {4}d\n {4}fix: fix or remove it\n✓ fine {2}\[store-healthy\]\n/,
    );
    assert.match(text, /\n! no metrics {2}\[metrics-unavailable\]\n/);
    assert.match(text, /\n1 error, 1 warning, 1 ok: the node is not set up right; fix the errors above\n$/);
  });

  it("judges the journal dir by the plugin's rule without creating a missing one", () => {
    const dir = tempDir('warren-doctor-journal-');
    const missing = join(dir, 'journal');
    assert.match(inspectJournalDir(missing).problem ?? '', /^does not exist/);
    assert.equal(existsSync(missing), false);
    mkdirSync(missing, { mode: 0o700 });
    assert.deepEqual(inspectJournalDir(missing), { dir: missing });
    chmodSync(missing, 0o777);
    assert.match(inspectJournalDir(missing).problem ?? '', /writable by its group or others \(mode 777\)/);
  });

  it('compares paths with links followed, also for a path that does not exist yet', () => {
    const dir = tempDir('warren-doctor-paths-');
    mkdirSync(join(dir, 'real'));
    symlinkSync(join(dir, 'real'), join(dir, 'link'));
    const real = canonicalPath(join(dir, 'real'));
    assert.equal(canonicalPath(join(dir, 'link')), real);
    assert.equal(canonicalPath(join(dir, 'link', 'warren.sock')), join(real, 'warren.sock'));
    assert.equal(canonicalPath('/no/such/dir/x'), '/no/such/dir/x');
  });
});
