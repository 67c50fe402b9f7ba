/**
 * `warren install --cni-bin-dir DIR`: the forwarder at DIR/warren, the fallback (a Node and the
 * plugin bundle) in DIR/warren.d/, every file 0755 and replaced whole by a rename (a reader sees
 * the old file or the new one, never a mix), the fallback before the forwarder, a copy of Node
 * unless --link, and a refusal that changes nothing when the build is missing.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { WARREN_BIN, run, tempDir, track } from '../helpers/processes.ts';
import { flush } from '../helpers/event-loop.ts';

/** A build output of the test's own: two files whose content says which build they are. */
function fakeBuild(tag: string, bytes = 64 * 1024): string {
  const dir = tempDir(`warren-build-${tag}-`);
  writeFileSync(join(dir, 'warren-forwarder'), Buffer.alloc(bytes, `forwarder ${tag};`));
  writeFileSync(join(dir, 'warren'), Buffer.alloc(bytes, `bundle ${tag};`));
  return dir;
}

const install = (...args: string[]) => run(process.execPath, [WARREN_BIN, 'install', ...args]);

interface Report {
  cniBinDir: string;
  installed: Array<{ path: string; source: string; kind: 'copy' | 'symlink'; bytes: number }>;
}

describe('warren install', () => {
  it('installs the forwarder, the bundle and a copy of this Node, 0755, and reports each with its size', async () => {
    const from = fakeBuild('a');
    const dir = join(tempDir(), 'cni', 'bin');
    const r = await install('--cni-bin-dir', dir, '--from', from, '--json');
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout) as Report;
    const node = realpathSync(process.execPath);
    assert.deepEqual(report, {
      cniBinDir: dir,
      installed: [
        { path: join(dir, 'warren.d', 'node'), source: node, kind: 'copy', bytes: statSync(node).size },
        { path: join(dir, 'warren.d', 'warren.cjs'), source: join(from, 'warren'), kind: 'copy', bytes: 64 * 1024 },
        { path: join(dir, 'warren'), source: join(from, 'warren-forwarder'), kind: 'copy', bytes: 64 * 1024 },
      ],
    });
    for (const file of report.installed) {
      const st = lstatSync(file.path);
      assert.ok(st.isFile(), `${file.path} is a file`);
      assert.equal(st.mode & 0o7777, 0o755, `${file.path} is 0755`);
      assert.ok(readFileSync(file.path).equals(readFileSync(file.source)), `${file.path} is a whole copy`);
    }
    assert.equal(statSync(join(dir, 'warren.d')).mode & 0o777, 0o755);
    assert.deepEqual(readdirSync(dir).sort(), ['warren', 'warren.d'], 'no temp file left');
    assert.deepEqual(readdirSync(join(dir, 'warren.d')).sort(), ['node', 'warren.cjs']);
  });

  it('says in words what it installed', async () => {
    const from = fakeBuild('words');
    const dir = tempDir();
    const r = await install('--cni-bin-dir', dir, '--from', from, '--link');
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split('\n'), [
      `installed ${join(dir, 'warren.d', 'node')} (${statSync(process.execPath).size} bytes, symlink to ${realpathSync(process.execPath)})`,
      `installed ${join(dir, 'warren.d', 'warren.cjs')} (65536 bytes, from ${join(from, 'warren')})`,
      `installed ${join(dir, 'warren')} (65536 bytes, from ${join(from, 'warren-forwarder')})`,
    ]);
  });

  it('--link links this Node (symlinks resolved) instead of copying it', async () => {
    const dir = tempDir();
    const r = await install('--cni-bin-dir', dir, '--from', fakeBuild('link'), '--link', '--json');
    assert.equal(r.code, 0, r.stderr);
    const node = join(dir, 'warren.d', 'node');
    assert.ok(lstatSync(node).isSymbolicLink());
    assert.equal(readlinkSync(node), realpathSync(process.execPath));
    assert.equal((JSON.parse(r.stdout) as Report).installed[0]?.kind, 'symlink');
  });

  it('replaces a file present before whole, by a rename: who opened the old one keeps reading the old one', async () => {
    const dir = tempDir();
    assert.equal((await install('--cni-bin-dir', dir, '--from', fakeBuild('old'), '--link')).code, 0);
    const before = statSync(join(dir, 'warren'));
    const fd = openSync(join(dir, 'warren'), 'r');
    try {
      const r = await install('--cni-bin-dir', dir, '--from', fakeBuild('new'), '--link');
      assert.equal(r.code, 0, r.stderr);
      const old = Buffer.alloc(32);
      readSync(fd, old, 0, 32, 0);
      assert.match(old.toString(), /^forwarder old;/, 'the open file is untouched');
    } finally {
      closeSync(fd);
    }
    assert.notEqual(statSync(join(dir, 'warren')).ino, before.ino, 'a new file, not the old one rewritten');
    assert.match(readFileSync(join(dir, 'warren'), 'utf8'), /^forwarder new;/);
    assert.match(readFileSync(join(dir, 'warren.d', 'warren.cjs'), 'utf8'), /^bundle new;/);
  });

  it('never shows a reader half a file while installs replace it again and again', async () => {
    const size = 8 * 1024 * 1024;
    const builds = [fakeBuild('one', size), fakeBuild('two', size)];
    /** Every whole file the installs write, by its first bytes (which name the build and the file). */
    const whole = new Map(
      builds.flatMap((b) =>
        ['warren-forwarder', 'warren']
          .map((name) => readFileSync(join(b, name)))
          .map((content) => [content.toString('hex', 0, 64), content] as const),
      ),
    );
    const dir = tempDir();
    assert.equal((await install('--cni-bin-dir', dir, '--from', builds[0] as string, '--link')).code, 0);
    let installing = true;
    let reads = 0;
    const reader = (async () => {
      while (installing) {
        for (const path of [join(dir, 'warren'), join(dir, 'warren.d', 'warren.cjs')]) {
          const content = readFileSync(path);
          assert.equal(content.length, size, `${path} read whole`);
          assert.ok(
            content.equals(whole.get(content.toString('hex', 0, 64)) ?? Buffer.alloc(0)),
            `${path} is one whole file of a build`,
          );
          reads += 1;
        }
        await flush();
      }
    })();
    try {
      for (let i = 1; i <= 6; i++) {
        const child = track(
          spawn(
            process.execPath,
            [WARREN_BIN, 'install', '--cni-bin-dir', dir, '--from', builds[i % 2] as string, '--link'],
            { stdio: 'ignore' },
          ),
        );
        const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
        assert.equal(code, 0);
      }
    } finally {
      installing = false;
      await reader;
    }
    assert.ok(reads > 6, `the reader read while installing (${reads} reads)`);
  });

  it('installs the fallback before the forwarder', async () => {
    const dir = tempDir();
    const report = JSON.parse(
      (await install('--cni-bin-dir', dir, '--from', fakeBuild('order'), '--link', '--json')).stdout,
    ) as Report;
    assert.deepEqual(
      report.installed.map((f) => f.path.slice(dir.length + 1)),
      ['warren.d/node', 'warren.d/warren.cjs', 'warren'],
    );
    const changed = (path: string) => lstatSync(path).ctimeMs;
    assert.ok(changed(join(dir, 'warren')) >= changed(join(dir, 'warren.d', 'warren.cjs')));
  });

  it('refuses, installing nothing, when the build is missing, and says to run npm run build', async () => {
    const empty = tempDir();
    const dir = join(tempDir(), 'bin');
    const noForwarder = await install('--cni-bin-dir', dir, '--from', empty);
    assert.equal(noForwarder.code, 1);
    assert.equal(
      noForwarder.stderr,
      `warren: NOT_FOUND: ${join(empty, 'warren-forwarder')} (the native forwarder) is missing: run \`npm run build\` first\n`,
    );
    writeFileSync(join(empty, 'warren-forwarder'), 'x');
    const noBundle = await install('--cni-bin-dir', dir, '--from', empty);
    assert.equal(noBundle.code, 1);
    assert.equal(
      noBundle.stderr,
      `warren: NOT_FOUND: ${join(empty, 'warren')} (the TypeScript plugin bundle) is missing: run \`npm run build\` first\n`,
    );
    assert.equal(existsSync(dir), false, 'nothing created');
  });

  it('refuses to run without --cni-bin-dir, with the usage (exit 2)', async () => {
    const r = await install();
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^warren: install needs --cni-bin-dir DIR/);
    assert.match(r.stderr, /usage: warren <command>/);
    assert.equal((await install('--cni-bin-dir', tempDir(), '--colour')).code, 2);
  });

  it('installs again over itself, the same content', async () => {
    const from = fakeBuild('again');
    const dir = tempDir();
    mkdirSync(join(dir, 'warren.d'));
    for (let i = 0; i < 2; i++) assert.equal((await install('--cni-bin-dir', dir, '--from', from, '--link')).code, 0);
    assert.ok(readFileSync(join(dir, 'warren')).equals(readFileSync(join(from, 'warren-forwarder'))));
    assert.deepEqual(readdirSync(dir).sort(), ['warren', 'warren.d']);
  });

  it('installs the real build by default (dist/)', async () => {
    const dir = tempDir();
    const r = await install('--cni-bin-dir', dir, '--link', '--json');
    if (r.code !== 0 && /npm run build/.test(r.stderr)) return; // not built here; the e2e helpers build and install it
    assert.equal(r.code, 0, r.stderr);
    const sources = (JSON.parse(r.stdout) as Report).installed.map((f) => f.source.split('/').slice(-2).join('/'));
    assert.deepEqual(sources.slice(1), ['dist/warren', 'dist/warren-forwarder']);
  });
});
