/**
 * The pod sandbox ("pause") image for tests that run containerd's CRI plugin, made without a
 * registry: an OCI image layout tar that `ctr images import` reads, holding one uncompressed layer
 * with busybox-static at /bin/busybox and a config whose entrypoint sleeps for ever. Built once per
 * test process into a private temp dir (removed at exit); every call returns the same file.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './processes.ts';

/** The name the image is imported under; containerd's `sandbox_image` must say the same. */
export const SANDBOX_IMAGE = 'warren.test/pause:1';
export const BUSYBOX = '/bin/busybox';

export function haveBusybox(): boolean {
  return existsSync(BUSYBOX);
}

/** OCI platform architecture names for Node's `process.arch`. */
function ociArchitecture(): string {
  const names: Partial<Record<NodeJS.Architecture, string>> = {
    x64: 'amd64',
    arm64: 'arm64',
    arm: 'arm',
    ppc64: 'ppc64le',
    s390x: 's390x',
    riscv64: 'riscv64',
  };
  return names[process.arch] ?? process.arch;
}

interface Blob {
  readonly digest: string;
  readonly size: number;
}

/** Writes bytes as a content-addressed blob of the layout; returns its descriptor fields. */
function putBlob(layout: string, bytes: Buffer): Blob {
  const hex = createHash('sha256').update(bytes).digest('hex');
  writeFileSync(join(layout, 'blobs', 'sha256', hex), bytes);
  return { digest: `sha256:${hex}`, size: bytes.length };
}

function tar(args: readonly string[]): void {
  const r = spawnSync('tar', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tar ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
}

// Fixed owner and times make the layer (and so every digest) the same on every build.
const REPRODUCIBLE = ['--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '--sort=name'];

let built: string | undefined;

/** The path of the image layout tar, built on first use. */
export function sandboxImageTar(): string {
  if (built !== undefined) return built;
  const dir = tempDir('warren-pause-');
  const rootfs = join(dir, 'rootfs');
  // Empty mount points runc would otherwise have to create in the container's rootfs.
  for (const d of ['bin', 'dev', 'proc', 'sys', 'etc', 'tmp']) mkdirSync(join(rootfs, d), { recursive: true });
  copyFileSync(BUSYBOX, join(rootfs, 'bin', 'busybox'));
  const layerTar = join(dir, 'layer.tar');
  tar(['-C', rootfs, ...REPRODUCIBLE, '-cf', layerTar, '.']);

  const layout = join(dir, 'layout');
  mkdirSync(join(layout, 'blobs', 'sha256'), { recursive: true });
  // Uncompressed: the diff id (digest of the uncompressed tar) is the layer blob's own digest.
  const layer = putBlob(layout, readFileSync(layerTar));
  const config = putBlob(
    layout,
    Buffer.from(
      JSON.stringify({
        architecture: ociArchitecture(),
        os: 'linux',
        config: { Entrypoint: ['/bin/busybox', 'sleep', 'infinity'], WorkingDir: '/' },
        rootfs: { type: 'layers', diff_ids: [layer.digest] },
      }),
    ),
  );
  const manifestMediaType = 'application/vnd.oci.image.manifest.v1+json';
  const manifest = putBlob(
    layout,
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: manifestMediaType,
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
        layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layer }],
      }),
    ),
  );
  writeFileSync(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(layout, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: manifestMediaType,
          ...manifest,
          // containerd names the imported image after this annotation, not the OCI ref name.
          annotations: { 'io.containerd.image.name': SANDBOX_IMAGE, 'org.opencontainers.image.ref.name': '1' },
        },
      ],
    }),
  );
  const imageTar = join(dir, 'pause.tar');
  tar(['-C', layout, ...REPRODUCIBLE, '-cf', imageTar, 'oci-layout', 'index.json', 'blobs']);
  built = imageTar;
  return imageTar;
}
