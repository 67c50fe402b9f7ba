/**
 * Where containerd looks for CNI plugins and configs, read from its config TOML in a temp dir: each
 * config version's table, `bin_dirs` and the deprecated `bin_dir`, defaults for what is unset,
 * imports (with `*`) overriding the main file, and a file that is missing, not TOML or of the
 * wrong shape: a value saying why, never a throw.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DEFAULT_CNI_BIN_DIR, readContainerdConfig } from '../../../src/cli/doctor/containerd-config.ts';
import { DEFAULT_CNI_CONF_DIR } from '../../../src/agent/settings/table.ts';
import { DEFAULT_CONTAINERD_SOCKET } from '../../../src/sources/containerd/socket.ts';
import { tempDir } from '../../helpers/processes.ts';

function configFile(text: string, name = 'config.toml', dir = tempDir('warren-doctor-ctrd-')): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function settingsOf(path: string) {
  const r = readContainerdConfig(path);
  assert.equal(r.kind, 'read', JSON.stringify(r));
  return r.kind === 'read' ? r.settings : undefined;
}

describe("containerd's config", () => {
  it('gives bin_dir and conf_dir of a version 2 config (containerd 1.x)', () => {
    const path = configFile(
      `version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\n  bin_dir = "/usr/libexec/cni"\n  conf_dir = "/etc/cni/custom"\n`,
    );
    assert.deepEqual(settingsOf(path), {
      binDirs: ['/usr/libexec/cni'],
      confDir: '/etc/cni/custom',
      grpcAddress: DEFAULT_CONTAINERD_SOCKET,
    });
  });

  it('gives bin_dirs, in order, of a version 3 config (containerd 2.x)', () => {
    const path = configFile(
      `version = 3\n[grpc]\naddress = "/run/k3s/containerd.sock"\n[plugins.'io.containerd.cri.v1.runtime'.cni]\nbin_dirs = ['/opt/cni/bin', '/opt/local/cni']\n`,
    );
    assert.deepEqual(settingsOf(path), {
      binDirs: ['/opt/cni/bin', '/opt/local/cni'],
      confDir: DEFAULT_CNI_CONF_DIR,
      grpcAddress: '/run/k3s/containerd.sock',
    });
  });

  it("takes a version 3 config's deprecated bin_dir", () => {
    const path = configFile(`version = 3\n[plugins."io.containerd.cri.v1.runtime".cni]\nbin_dir = "/x/bin"\n`);
    assert.deepEqual(settingsOf(path)?.binDirs, ['/x/bin']);
  });

  it('reads a version 1 config (no version) under plugins.cri', () => {
    const path = configFile(`[plugins.cri.cni]\nbin_dir = "/v1/bin"\nconf_dir = "/v1/conf"\n`);
    assert.deepEqual(settingsOf(path), {
      binDirs: ['/v1/bin'],
      confDir: '/v1/conf',
      grpcAddress: DEFAULT_CONTAINERD_SOCKET,
    });
  });

  it("gives containerd's defaults for what a readable config leaves unset, and ignores another version's table", () => {
    const path = configFile(`version = 3\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "/only/in/v2"\n`);
    assert.deepEqual(settingsOf(path), {
      binDirs: [DEFAULT_CNI_BIN_DIR],
      confDir: DEFAULT_CNI_CONF_DIR,
      grpcAddress: DEFAULT_CONTAINERD_SOCKET,
    });
  });

  it('follows imports, relative and with *, a later file overriding an earlier one', () => {
    const dir = tempDir('warren-doctor-ctrd-');
    mkdirSync(join(dir, 'conf.d'));
    configFile(
      `version = 3\n[plugins."io.containerd.cri.v1.runtime".cni]\nbin_dirs = ["/from/import/10"]\n`,
      'conf.d/10-cni.toml',
      dir,
    );
    configFile(
      `version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\nconf_dir = "/from/import/20"\n`,
      'conf.d/20-conf.toml',
      dir,
    );
    configFile('not toml at all [', 'conf.d/ignored.txt', dir);
    const path = configFile(
      `version = 3\nimports = ["conf.d/*.toml"]\n[plugins."io.containerd.cri.v1.runtime".cni]\nbin_dirs = ["/main"]\nconf_dir = "/main/conf"\n`,
      'config.toml',
      dir,
    );
    const r = readContainerdConfig(path);
    assert.equal(r.kind, 'read');
    if (r.kind !== 'read') return;
    assert.deepEqual(r.settings, {
      binDirs: ['/from/import/10'],
      confDir: '/from/import/20',
      grpcAddress: DEFAULT_CONTAINERD_SOCKET,
    });
    assert.deepEqual(r.files, [path, join(dir, 'conf.d', '10-cni.toml'), join(dir, 'conf.d', '20-conf.toml')]);
  });

  it('stops at a file that imports itself', () => {
    const dir = tempDir('warren-doctor-ctrd-');
    const path = configFile(`version = 2\nimports = ["${join(dir, 'config.toml')}"]\n`, 'config.toml', dir);
    assert.deepEqual(readContainerdConfig(path), {
      kind: 'read',
      path,
      files: [path],
      settings: {
        binDirs: [DEFAULT_CNI_BIN_DIR],
        confDir: DEFAULT_CNI_CONF_DIR,
        grpcAddress: DEFAULT_CONTAINERD_SOCKET,
      },
    });
  });

  it('says a missing file is absent', () => {
    const path = join(tempDir('warren-doctor-ctrd-'), 'config.toml');
    assert.deepEqual(readContainerdConfig(path), { kind: 'absent', path });
  });

  const unreadable: ReadonlyArray<[string, string, RegExp]> = [
    [
      'is not TOML',
      'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni\nbin_dir = "/x"\n',
      /config\.toml is not valid TOML: .*\(line 2, column \d+\)/,
    ],
    [
      'gives bin_dirs as a string',
      `version = 3\n[plugins."io.containerd.cri.v1.runtime".cni]\nbin_dirs = "/opt/cni/bin"\n`,
      /plugins\."io\.containerd\.cri\.v1\.runtime"\.cni\.bin_dirs must be a list of paths/,
    ],
    [
      'gives bin_dir as a number',
      `version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = 7\n`,
      /cni\.bin_dir must be a path/,
    ],
    [
      'gives conf_dir as a table',
      `version = 2\n[plugins."io.containerd.grpc.v1.cri".cni.conf_dir]\nx = 1\n`,
      /cni\.conf_dir must be a path/,
    ],
    [
      'has a version this doctor does not know',
      'version = 9\n',
      /version 9 is not a containerd config version this doctor knows/,
    ],
    [
      'imports a file that is not TOML',
      'version = 2\nimports = ["broken.toml"]\n',
      /broken\.toml (is not valid TOML|cannot be read)/,
    ],
  ];
  for (const [what, text, reason] of unreadable) {
    it(`says why a config that ${what} cannot be used`, () => {
      const dir = tempDir('warren-doctor-ctrd-');
      configFile('= nope', 'broken.toml', dir);
      const path = configFile(text, 'config.toml', dir);
      const r = readContainerdConfig(path);
      assert.equal(r.kind, 'unreadable');
      assert.match(r.kind === 'unreadable' ? r.reason : '', reason);
    });
  }

  it('says a directory in the place of the file cannot be read', () => {
    const path = tempDir('warren-doctor-ctrd-');
    const r = readContainerdConfig(path);
    assert.equal(r.kind, 'unreadable');
    assert.match(r.kind === 'unreadable' ? r.reason : '', /cannot be read: EISDIR/);
  });
});
