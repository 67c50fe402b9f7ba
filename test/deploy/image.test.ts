/**
 * The image scripts/build-image.ts builds without a registry, taken the way a node takes it: a
 * private containerd (Debian's 1.6, its own root, state and socket in a temp dir) imports the
 * archive with `ctr images import` and runs it. The archive is a valid OCI layout (digests,
 * sizes and the layer's diff_id match the bytes); the image runs `warren version`, and the
 * DaemonSet's init step (`warren install`) installs from it a plugin that works on the host.
 * The image, the namespace and the containerd are removed afterwards, even when a test fails.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createGunzip } from 'node:zlib';
import { buildPlugin } from '../../scripts/build.ts';
import {
  type ImageBuildReport,
  MEDIA_TYPES,
  buildImage,
  imageReference,
  packageVersion,
} from '../../scripts/build-image.ts';
import { type Containerd, haveContainerd, startContainerd } from '../helpers/containerd.ts';
import { isRoot, removeDir, run, tempDir } from '../helpers/processes.ts';

const NS = `warren-image-t${process.pid}`;
const skip = !isRoot() || !haveContainerd() ? 'needs root and containerd, runc' : false;

interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly annotations?: Record<string, string>;
  readonly platform?: { readonly architecture: string; readonly os: string };
}

async function sha256Of(stream: NodeJS.ReadableStream): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

describe('the image scripts/build-image.ts builds', { skip }, () => {
  let dir: string;
  let report: ImageBuildReport;
  let containerd: Containerd | undefined;

  before(async () => {
    buildPlugin();
    dir = tempDir('warren-image-test-');
    report = await buildImage({ out: join(dir, 'warren-image.oci.tar') });
    containerd = await startContainerd();
    const imported = await containerd.ctr(NS, 'images', 'import', report.out);
    assert.equal(imported.code, 0, `ctr images import: ${imported.stderr}`);
  });

  after(async () => {
    const failures: string[] = [];
    if (containerd !== undefined) {
      // Containers are removed by stop() if a run left one; the image and the namespace here,
      // while the daemon still answers.
      const removed = await containerd.ctr(NS, 'images', 'rm', '--sync', imageReference());
      if (removed.code !== 0) failures.push(`ctr images rm: ${removed.stderr}`);
      const namespace = await containerd.ctr(NS, 'namespaces', 'rm', NS);
      if (namespace.code !== 0) failures.push(`ctr namespaces rm: ${namespace.stderr}`);
      await containerd.stop([NS]);
      removeDir(containerd.dir);
    }
    if (dir !== undefined) removeDir(dir);
    assert.deepEqual(failures, [], 'cleaned up');
  });

  it('is an OCI layout whose digests, sizes and diff_id are those of its bytes', async (t) => {
    t.diagnostic(
      `archive ${(report.archiveBytes / 1e6).toFixed(1)} MB (layer ${(report.layerTarBytes / 1e6).toFixed(1)} MB uncompressed), built in ${report.seconds.toFixed(1)} s`,
    );
    const layout = join(dir, 'layout');
    mkdirSync(layout);
    const untar = await run('tar', ['-xf', report.out, '-C', layout]);
    assert.equal(untar.code, 0, untar.stderr);
    const blob = (digest: string) => join(layout, 'blobs', 'sha256', digest.replace(/^sha256:/, ''));
    const verified = async (d: Descriptor) => {
      assert.equal(lstatSync(blob(d.digest)).size, d.size, `${d.mediaType} size`);
      assert.equal(await sha256Of(createReadStream(blob(d.digest))), d.digest, `${d.mediaType} digest`);
      return blob(d.digest);
    };

    assert.deepEqual(JSON.parse(readFileSync(join(layout, 'oci-layout'), 'utf8')), { imageLayoutVersion: '1.0.0' });
    const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as {
      schemaVersion: number;
      mediaType: string;
      manifests: Descriptor[];
    };
    assert.equal(index.schemaVersion, 2);
    assert.equal(index.mediaType, MEDIA_TYPES.index);
    assert.equal(index.manifests.length, 1);
    const [top] = index.manifests as [Descriptor];
    assert.equal(top.mediaType, MEDIA_TYPES.manifest);
    assert.deepEqual(top.annotations, {
      'io.containerd.image.name': `docker.io/library/warren:${packageVersion()}`,
      'org.opencontainers.image.ref.name': packageVersion(),
    });
    assert.equal(top.platform?.os, 'linux');

    const manifest = JSON.parse(readFileSync(await verified(top), 'utf8')) as {
      schemaVersion: number;
      mediaType: string;
      config: Descriptor;
      layers: Descriptor[];
    };
    assert.equal(manifest.schemaVersion, 2);
    assert.equal(manifest.mediaType, MEDIA_TYPES.manifest);
    assert.equal(manifest.config.mediaType, MEDIA_TYPES.config);
    assert.deepEqual(
      manifest.layers.map((l) => l.mediaType),
      [MEDIA_TYPES.layer],
    );
    const config = JSON.parse(readFileSync(await verified(manifest.config), 'utf8')) as {
      architecture: string;
      os: string;
      config: { Entrypoint: string[]; Env: string[]; WorkingDir: string };
      rootfs: { type: string; diff_ids: string[] };
    };
    assert.equal(config.architecture, top.platform?.architecture);
    assert.deepEqual(config.config.Entrypoint, ['warren']);
    assert.equal(config.config.WorkingDir, '/app');
    assert.ok(config.config.Env.some((e) => e.startsWith('PATH=') && e.includes('/usr/local/bin')));
    const layer = await verified(manifest.layers[0] as Descriptor);
    assert.deepEqual(config.rootfs, {
      type: 'layers',
      diff_ids: [await sha256Of(createReadStream(layer).pipe(createGunzip()))],
    });
  });

  it("runs `warren version` under containerd and prints package.json's version", async () => {
    const ctr = containerd as Containerd;
    const r = await ctr.ctr(NS, 'run', '--rm', imageReference(), `warren-version-${process.pid}`, 'warren', 'version');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), `warren ${packageVersion()}`);
  });

  it("installs, as the DaemonSet's init step does, a plugin that runs on the host", async () => {
    const ctr = containerd as Containerd;
    const binDir = join(dir, 'opt-cni-bin');
    mkdirSync(binDir);
    const r = await ctr.ctr(
      NS,
      'run',
      '--rm',
      '--mount',
      `type=bind,src=${binDir},dst=/host/opt/cni/bin,options=rbind:rw`,
      imageReference(),
      `warren-install-${process.pid}`,
      'warren',
      'install',
      '--cni-bin-dir',
      '/host/opt/cni/bin',
      '--json',
    );
    assert.equal(r.code, 0, r.stderr);
    const installed = (JSON.parse(r.stdout) as { installed: { path: string; source: string }[] }).installed;
    assert.deepEqual(
      installed.map((f) => [f.path, f.source]),
      [
        ['/host/opt/cni/bin/warren.d/node', '/usr/local/bin/node'],
        ['/host/opt/cni/bin/warren.d/warren.cjs', '/app/dist/warren'],
        ['/host/opt/cni/bin/warren', '/app/dist/warren-forwarder'],
      ],
    );
    assert.deepEqual(readdirSync(binDir).sort(), ['warren', 'warren.d']);
    assert.ok(existsSync(join(binDir, 'warren.d', 'node')));
    // The runtime's VERSION call, on the host, through what the image installed. No agent
    // answers on that socket: the forwarder hands the call to the image's Node and bundle.
    const env = { CNI_COMMAND: 'VERSION', WARREN_SOCKET: join(dir, 'no-agent.sock'), PATH: '/usr/bin:/bin' };
    const version = await run(join(binDir, 'warren'), [], { env, stdin: '{"cniVersion":"1.0.0"}' });
    assert.equal(version.code, 0, version.stderr);
    assert.ok(
      (JSON.parse(version.stdout) as { supportedVersions: string[] }).supportedVersions.includes('1.0.0'),
      version.stdout,
    );
  });
});
