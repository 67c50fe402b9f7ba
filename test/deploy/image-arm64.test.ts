/**
 * The arm64 image (`node scripts/build-image.ts --arch arm64`), built on this amd64 machine and
 * run here under Debian's qemu-user-static. Its archive is a valid OCI layout for linux/arm64; its
 * layer, listed and extracted, carries Node and the forwarder for AArch64 (the forwarder static),
 * every library they and /usr/bin/env ask for, and the same application as the amd64 image
 * (compared with one built beside it). Then, in the extracted layer:
 * - `warren version` runs in a chroot to it under qemu (qemu copied in, nothing of the host
 *   visible), as /usr/local/bin/node /app/bin/warren. Not through the entrypoint `warren`
 *   (`#!/usr/bin/env node`): env execs node, and without binfmt_misc (not registered here, and
 *   registering it is machine-wide) an exec of an arm64 program from an emulated one goes to the
 *   host's kernel, which refuses it.
 * - the forwarder answers the runtime's VERSION call under qemu, handing it, with no agent, to the
 *   image's plugin bundle on the image's arm64 Node (for the same reason, through a host script
 *   that starts that Node under qemu, named by WARREN_FORWARDER_FALLBACK_DIR).
 * Everything made is under one temp dir, removed afterwards.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  copyFileSync,
  createReadStream,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, posix } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createGunzip } from 'node:zlib';
import { buildPlugin } from '../../scripts/build.ts';
import { type ImageBuildReport, MEDIA_TYPES, buildImage, packageVersion } from '../../scripts/build-image.ts';
import { elfFacts } from '../../scripts/image-cross.ts';
import { isRoot, removeDir, run, tempDir } from '../helpers/processes.ts';

const QEMU = '/usr/bin/qemu-aarch64-static';
const haveQemu = (() => {
  try {
    return lstatSync(QEMU).isFile();
  } catch {
    return false;
  }
})();
const skip = !isRoot() || !haveQemu ? 'needs root (chroot) and qemu-user-static' : false;
const AARCH64 = 183;
/** Where a NEEDED library is looked for on arm64 Debian (no RUNPATH in these executables). */
const LIBRARY_DIRS = ['/lib/aarch64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/lib', '/usr/lib'];

interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly platform?: { readonly architecture: string; readonly os: string };
}

async function sha256Of(stream: NodeJS.ReadableStream): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

/** The ELF header's e_machine and whether a program header is PT_INTERP or PT_DYNAMIC (64-bit, little-endian). */
function elfHeader(file: string): { machine: number; dynamic: boolean } {
  const fd = openSync(file, 'r');
  try {
    const header = Buffer.alloc(64);
    readSync(fd, header, 0, 64, 0);
    assert.deepEqual([...header.subarray(0, 5)], [0x7f, 0x45, 0x4c, 0x46, 2], `${file} is 64-bit ELF`);
    const phoff = Number(header.readBigUInt64LE(32));
    const phentsize = header.readUInt16LE(54);
    const phnum = header.readUInt16LE(56);
    const table = Buffer.alloc(phentsize * phnum);
    readSync(fd, table, 0, table.length, phoff);
    const types = Array.from({ length: phnum }, (_, i) => table.readUInt32LE(i * phentsize));
    return { machine: header.readUInt16LE(18), dynamic: types.includes(2) || types.includes(3) };
  } finally {
    closeSync(fd);
  }
}

/** The archive's one manifest and config, checked against their digests; and the layer's path. */
async function readImage(archive: string, into: string) {
  mkdirSync(into);
  execFileSync('tar', ['-xf', archive, '-C', into]);
  const blob = (digest: string) => join(into, 'blobs', 'sha256', digest.replace(/^sha256:/, ''));
  const verified = async (d: Descriptor) => {
    assert.equal(lstatSync(blob(d.digest)).size, d.size, `${d.mediaType} size`);
    assert.equal(await sha256Of(createReadStream(blob(d.digest))), d.digest, `${d.mediaType} digest`);
    return blob(d.digest);
  };
  const index = JSON.parse(readFileSync(join(into, 'index.json'), 'utf8')) as { manifests: Descriptor[] };
  assert.equal(index.manifests.length, 1);
  const top = index.manifests[0] as Descriptor;
  const manifest = JSON.parse(readFileSync(await verified(top), 'utf8')) as {
    config: Descriptor;
    layers: Descriptor[];
  };
  const config = JSON.parse(readFileSync(await verified(manifest.config), 'utf8')) as {
    architecture: string;
    os: string;
    config: { Entrypoint: string[]; Cmd: string[]; WorkingDir: string };
    rootfs: { diff_ids: string[] };
  };
  assert.equal(manifest.layers.length, 1);
  const layer = await verified(manifest.layers[0] as Descriptor);
  assert.deepEqual(config.rootfs.diff_ids, [await sha256Of(createReadStream(layer).pipe(createGunzip()))]);
  return { platform: top.platform, mediaType: manifest.layers[0]?.mediaType, config, layer };
}

/** The layer's entries under app/ as `tar -tv` lists them (mode, owner, size, time, name, link). */
function appListing(layer: string): string[] {
  return execFileSync('tar', ['-tvzf', layer], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
    .split('\n')
    .filter((line) => / app\//.test(line) && !line.endsWith(' app/dist/warren-forwarder'));
}

describe('the arm64 image', { skip }, () => {
  let dir: string;
  let report: ImageBuildReport;
  let image: Awaited<ReturnType<typeof readImage>>;
  let rootfs: string;

  before(async () => {
    buildPlugin();
    dir = tempDir('warren-image-arm64-');
    report = await buildImage({ arch: 'arm64', out: join(dir, 'warren-image-arm64.oci.tar') });
    image = await readImage(report.out, join(dir, 'layout-arm64'));
    rootfs = join(dir, 'rootfs');
    mkdirSync(rootfs);
    execFileSync('tar', ['-xzf', image.layer, '-C', rootfs]);
  });

  after(() => {
    if (dir !== undefined) removeDir(dir);
  });

  it('is an OCI image for linux/arm64 with the entrypoint, command and working directory of the amd64 one', (t) => {
    t.diagnostic(`archive ${(report.archiveBytes / 1e6).toFixed(1)} MB, built in ${report.seconds.toFixed(1)} s`);
    assert.equal(report.arch, 'arm64');
    assert.deepEqual(image.platform, { architecture: 'arm64', os: 'linux' });
    assert.equal(image.mediaType, MEDIA_TYPES.layer);
    assert.equal(image.config.architecture, 'arm64');
    assert.equal(image.config.os, 'linux');
    assert.deepEqual(image.config.config.Entrypoint, ['warren']);
    assert.deepEqual(image.config.config.Cmd, ['agent']);
    assert.equal(image.config.config.WorkingDir, '/app');
  });

  it('carries Node and the forwarder for AArch64, the forwarder static, and /usr/bin/env', () => {
    const node = elfHeader(join(rootfs, 'usr/local/bin/node'));
    assert.deepEqual(node, { machine: AARCH64, dynamic: true });
    assert.deepEqual(elfHeader(join(rootfs, 'app/dist/warren-forwarder')), { machine: AARCH64, dynamic: false });
    assert.deepEqual(elfHeader(join(rootfs, 'usr/bin/env')), { machine: AARCH64, dynamic: true });
    assert.equal(lstatSync(join(rootfs, 'usr/local/bin/warren')).isSymbolicLink(), true);
  });

  it('carries the loader and every library Node, env and those libraries ask for, recursively', () => {
    /** `path` in the image, its symbolic links followed inside the image. */
    const resolved = (path: string, depth = 0): string => {
      assert.ok(depth < 10, `${path}: a loop of links`);
      const stat = lstatSync(join(rootfs, path), { throwIfNoEntry: false });
      assert.ok(stat !== undefined, `${path} is in the layer`);
      if (!stat.isSymbolicLink()) return path;
      return resolved(
        posix.resolve(posix.dirname(path), execFileSync('readlink', [join(rootfs, path)], { encoding: 'utf8' }).trim()),
        depth + 1,
      );
    };
    const seen = new Set<string>();
    const pending = ['/usr/local/bin/node', '/usr/bin/env'];
    for (let path = pending.shift(); path !== undefined; path = pending.shift()) {
      if (seen.has(path)) continue;
      seen.add(path);
      const facts = elfFacts(join(rootfs, path), 'arm64');
      assert.equal(facts.machine, 'AArch64', path);
      if (facts.interpreter !== undefined) pending.push(resolved(facts.interpreter));
      for (const soname of facts.needed) {
        const dir = LIBRARY_DIRS.find(
          (d) => lstatSync(join(rootfs, d, soname), { throwIfNoEntry: false }) !== undefined,
        );
        assert.ok(dir !== undefined, `${soname}, which ${path} needs, is in the layer`);
        pending.push(resolved(posix.join(dir, soname)));
      }
    }
    for (const name of ['libc.so.6', 'libstdc++.so.6.0.30', 'ld-linux-aarch64.so.1'])
      assert.ok(
        [...seen].some((path) => path.endsWith(`/${name}`)),
        name,
      );
  });

  it('carries the same application and production node_modules as the amd64 image, no native addon', async () => {
    const amd64 = await buildImage({ out: join(dir, 'warren-image.oci.tar') });
    const other = await readImage(amd64.out, join(dir, 'layout-amd64'));
    const listing = appListing(image.layer);
    assert.ok(
      listing.some((line) => line.endsWith(' app/node_modules/')),
      'node_modules',
    );
    assert.deepEqual(listing, appListing(other.layer));
    assert.deepEqual(
      listing.filter((line) => line.endsWith('.node')),
      [],
    );
  });

  it("runs `warren version` in a chroot to its layer under qemu and prints package.json's version", async () => {
    copyFileSync(QEMU, join(rootfs, 'qemu-aarch64-static'));
    const r = await run(
      '/usr/sbin/chroot',
      [rootfs, '/qemu-aarch64-static', '/usr/local/bin/node', '/app/bin/warren', 'version'],
      {
        env: { PATH: '/usr/local/bin:/usr/bin:/bin' },
      },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), `warren ${packageVersion()}`);
  });

  it("answers the runtime's VERSION call through its forwarder under qemu, with the image's arm64 plugin", async () => {
    const fallback = join(dir, 'warren.d');
    mkdirSync(fallback);
    writeFileSync(
      join(fallback, 'node'),
      `#!/bin/sh\nexec ${QEMU} -L '${rootfs}' '${rootfs}/usr/local/bin/node' "$@"\n`,
      {
        mode: 0o755,
      },
    );
    symlinkSync(join(rootfs, 'app/dist/warren'), join(fallback, 'warren.cjs'));
    const env = {
      CNI_COMMAND: 'VERSION',
      WARREN_SOCKET: join(dir, 'no-agent.sock'),
      WARREN_FORWARDER_FALLBACK_DIR: fallback,
      PATH: '/usr/bin:/bin',
    };
    const r = await run(QEMU, [join(rootfs, 'app/dist/warren-forwarder')], { env, stdin: '{"cniVersion":"1.0.0"}' });
    assert.equal(r.code, 0, r.stderr);
    assert.ok((JSON.parse(r.stdout) as { supportedVersions: string[] }).supportedVersions.includes('1.0.0'), r.stdout);
  });
});
