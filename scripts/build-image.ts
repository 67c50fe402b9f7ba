/**
 * Builds Warren's image without docker, buildah or a registry: the content deploy/Dockerfile
 * describes, assembled from this machine, written as an OCI image layout and tarred into one
 * archive that containerd imports (`ctr -n k8s.io images import dist/warren-image.oci.tar`).
 * Hand-written because none of those tools is on a build machine here, and an OCI layout with one
 * layer is small: a gzip'd tar, a config and a manifest named by their sha256, and an index.
 *
 * The root filesystem, one layer:
 *   /usr/local/bin/node     this Node (process.execPath, symlinks resolved)
 *   /lib..., /lib64/...     exactly the shared libraries `ldd` lists for it and for /usr/bin/env,
 *                           and the dynamic loader, each at the path ldd names
 *   /usr/bin/env            for bin/warren's `#!/usr/bin/env node`
 *   /app/                   bin/ src/ dist/ (the plugin bundle, the forwarder, the agent bundle) package.json,
 *                           and node_modules with the production dependencies only (the
 *                           packages `npm ls --omit=dev` names, copied from this repository's,
 *                           then `npm prune --omit=dev`, offline: no registry is needed)
 *   /usr/local/bin/warren   a symlink to /app/bin/warren: `warren` on PATH (probes, init step)
 *   /etc/passwd, /etc/group root only; /root, /tmp, /run, /var/run -> /run (as on Debian, so a
 *                           mount at /var/run/netns lands at /run/netns and both spellings agree)
 * Entrypoint `warren`, command `agent`, working directory /app.
 *
 * Another architecture (`--arch arm64` on this amd64 machine; scripts/image-cross.ts): the same
 * tree, with that architecture's Node, forwarder, /usr/bin/env and libraries (from the cache
 * scripts/setup.sh fills, no network), in its own archive, dist/warren-image-arm64.oci.tar. One
 * archive per architecture rather than one multi-platform index: a node imports the archive and
 * keeps every blob in it, so a combined archive would carry each node another architecture's
 * ~65 MB it never runs; and picking a platform out of an index is what a registry does for a
 * pull, which this build has none of. The JavaScript (app, bundles, node_modules) is the same in
 * both: the production dependencies are pure JavaScript, no native addon.
 *
 * Guarantees:
 * - Reproducible: the same inputs give the same bytes. The tars are made by the system's GNU tar
 *   with names sorted, owners 0, every mtime the epoch; the JSON is written in a fixed key order;
 *   the gzip header carries no time.
 * - config.rootfs.diff_ids is the sha256 of the uncompressed layer, the layer's descriptor the
 *   sha256 and size of the gzip'd one, both hashed from the streams as they are written.
 * - The archive appears whole or not at all: written under a temp name beside it, then renamed.
 * - Needs `npm run build` first (dist/); refuses, changing nothing, without it.
 *
 * Usage: node scripts/build-image.ts [--arch amd64|arm64] [--out PATH] [--gzip-level 0-9]
 */
import { spawn, execFileSync } from 'node:child_process';
import { createHash, type Hash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  cpSync,
  createWriteStream,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  rmdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createGzip } from 'node:zlib';
import { FORWARDER_BINARY, REPO_ROOT } from './build.ts';
import { CROSS_CACHE, IMAGE_ARCHES, type ImageArch, type NativeParts, crossParts } from './image-cross.ts';

export const MEDIA_TYPES = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

export const DEFAULT_ARCHIVE = join(REPO_ROOT, 'dist', 'warren-image.oci.tar');

/** The archive an architecture's image is written to by default: this machine's, or one named after it. */
export function defaultArchive(arch: string): string {
  return arch === imagePlatform().architecture
    ? DEFAULT_ARCHIVE
    : join(REPO_ROOT, 'dist', `warren-image-${arch}.oci.tar`);
}

/**
 * Fast: measured here, level 1 gives 66 MB in 3.4 s of CPU, level 6 gives 59 MB in 5.2 s (most of
 * the build's time is file copying either way). --gzip-level 6 for an archive that travels far.
 */
export const DEFAULT_GZIP_LEVEL = 1;
/** Where the application lives in the image, and the working directory. */
export const APP_DIR = '/app';
/** What `npm run build` leaves in dist/ and the image carries (never the archive itself). */
const DIST_FILES = ['warren', 'warren-forwarder', 'package.json', 'cli/main.mjs', 'cli/inputs.txt'] as const;
const IMAGE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Every tar this script makes: the same bytes from the same files, whoever and whenever. */
const DETERMINISTIC_TAR = ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '--format=gnu'];
const EPOCH = '1970-01-01T00:00:00Z';

export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

/** The tag: the package's version, as the DaemonSet names the image (`warren:<version>`). */
export function imageTag(): string {
  return packageVersion();
}

/** The name containerd gives the image on import (`io.containerd.image.name`). */
export function imageReference(): string {
  return `docker.io/library/warren:${imageTag()}`;
}

export interface ImageBuildOptions {
  /** The archive to write; default defaultArchive(arch): dist/warren-image.oci.tar for this machine's. */
  readonly out?: string;
  readonly gzipLevel?: number;
  /** The Node executable to carry; default this process's. Only for this machine's architecture. */
  readonly node?: string;
  /** The architecture; default this machine's. Another is built from the cache (scripts/image-cross.ts). */
  readonly arch?: ImageArch;
  /** Where the cross build's inputs are; default .cache/cross. */
  readonly crossCache?: string;
}

export interface ImageBuildReport {
  readonly out: string;
  readonly arch: string;
  readonly reference: string;
  readonly manifestDigest: string;
  readonly layerDigest: string;
  readonly diffId: string;
  /** The layer, uncompressed and gzip'd, and the whole archive, in bytes. */
  readonly layerTarBytes: number;
  readonly layerBytes: number;
  readonly archiveBytes: number;
  readonly seconds: number;
}

/** Builds the image archive; see the module header. */
export async function buildImage(options: ImageBuildOptions = {}): Promise<ImageBuildReport> {
  const started = performance.now();
  const host = imagePlatform();
  const arch = options.arch ?? host.architecture;
  if (!(IMAGE_ARCHES as readonly string[]).includes(arch))
    throw new Error(`no image for ${arch}: ${IMAGE_ARCHES.join(' or ')}`);
  const cross = arch !== host.architecture;
  if (cross && options.node !== undefined) throw new Error(`--node is this machine's Node, not ${arch}'s`);
  const out = resolve(options.out ?? defaultArchive(arch));
  const gzipLevel = options.gzipLevel ?? DEFAULT_GZIP_LEVEL;
  if (!Number.isInteger(gzipLevel) || gzipLevel < 0 || gzipLevel > 9)
    throw new Error(`gzip level ${gzipLevel} is not 0 to 9`);
  const dist = join(REPO_ROOT, 'dist');
  for (const file of DIST_FILES) {
    if (!existsSync(join(dist, file))) throw new Error(`${join(dist, file)} is missing: run \`npm run build\` first`);
  }
  const platform = { architecture: arch, os: 'linux' };
  const work = mkdtempSync(join(tmpdir(), 'warren-image-'));
  try {
    const rootfs = join(work, 'rootfs');
    const parts = cross
      ? crossParts(arch as ImageArch, work, options.crossCache ?? CROSS_CACHE)
      : hostParts(realpathSync(options.node ?? process.execPath));
    assembleRootfs(rootfs, parts);
    const layout = join(work, 'layout');
    const blobs = join(layout, 'blobs', 'sha256');
    mkdirSync(blobs, { recursive: true });
    const layer = await writeLayer(rootfs, blobs, gzipLevel);
    const config = writeBlob(blobs, {
      created: EPOCH,
      architecture: platform.architecture,
      os: platform.os,
      config: {
        Entrypoint: ['warren'],
        Cmd: ['agent'],
        Env: [`PATH=${IMAGE_PATH}`],
        WorkingDir: APP_DIR,
        Labels: { 'org.opencontainers.image.title': 'warren', 'org.opencontainers.image.version': packageVersion() },
      },
      rootfs: { type: 'layers', diff_ids: [layer.diffId] },
      history: [{ created: EPOCH, created_by: 'scripts/build-image.ts' }],
    });
    const manifest = writeBlob(blobs, {
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.manifest,
      config: { mediaType: MEDIA_TYPES.config, digest: config.digest, size: config.size },
      layers: [{ mediaType: MEDIA_TYPES.layer, digest: layer.digest, size: layer.size }],
    });
    const reference = imageReference();
    writeJson(join(layout, 'oci-layout'), { imageLayoutVersion: '1.0.0' });
    writeJson(join(layout, 'index.json'), {
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.index,
      manifests: [
        {
          mediaType: MEDIA_TYPES.manifest,
          digest: manifest.digest,
          size: manifest.size,
          platform,
          // containerd names the image after io.containerd.image.name; ref.name is the tag, as
          // `ctr images export` writes it.
          annotations: { 'io.containerd.image.name': reference, 'org.opencontainers.image.ref.name': imageTag() },
        },
      ],
    });
    mkdirSync(dirname(out), { recursive: true });
    const temp = join(dirname(out), `.${basename(out)}.tmp-${process.pid}`);
    try {
      execFileSync(
        'tar',
        [
          '--create',
          `--file=${temp}`,
          `--directory=${layout}`,
          ...DETERMINISTIC_TAR,
          'blobs',
          'index.json',
          'oci-layout',
        ],
        { stdio: ['ignore', 'ignore', 'inherit'] },
      );
      renameSync(temp, out);
    } catch (error) {
      rmSync(temp, { force: true });
      throw error;
    }
    return {
      out,
      arch,
      reference,
      manifestDigest: manifest.digest,
      layerDigest: layer.digest,
      diffId: layer.diffId,
      layerTarBytes: layer.tarBytes,
      layerBytes: layer.size,
      archiveBytes: statSync(out).size,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The image's platform: this Node's, in the OCI's (Go's) names. */
function imagePlatform(): { architecture: string; os: string } {
  if (process.platform !== 'linux') throw new Error(`an image is built on Linux, not ${process.platform}`);
  const architecture = (
    { x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64' } as Record<
      string,
      string
    >
  )[process.arch];
  if (architecture === undefined) throw new Error(`no OCI architecture name for ${process.arch}`);
  return { architecture, os: 'linux' };
}

/** This machine's Node, /usr/bin/env and forwarder, with the libraries ldd lists for them. */
function hostParts(node: string): NativeParts {
  const env = realpathSync('/usr/bin/env');
  const libraries = new Set([...sharedLibraries(node), ...sharedLibraries(env)]);
  return {
    node,
    env,
    forwarder: FORWARDER_BINARY,
    system: [...libraries].map((path) => ({ path, source: realpathSync(path) })),
  };
}

function assembleRootfs(rootfs: string, parts: NativeParts): void {
  mkdirSync(rootfs);
  for (const dir of ['app', 'etc', 'dev', 'proc', 'sys', 'run', 'var', 'usr/bin', 'usr/local/bin'])
    makeDirs(rootfs, dir);
  makeDirs(rootfs, 'root', 0o700);
  makeDirs(rootfs, 'tmp', 0o1777);
  symlinkSync('/run', join(rootfs, 'var', 'run'));
  writeFileSync(join(rootfs, 'etc', 'passwd'), 'root:x:0:0:root:/root:/sbin/nologin\n', { mode: 0o644 });
  writeFileSync(join(rootfs, 'etc', 'group'), 'root:x:0:\n', { mode: 0o644 });

  placeExecutable(parts.node, join(rootfs, 'usr', 'local', 'bin', 'node'));
  placeExecutable(parts.env, join(rootfs, 'usr', 'bin', 'env'));
  for (const entry of parts.system) {
    const target = join(rootfs, entry.path);
    makeDirs(rootfs, dirname(entry.path));
    if (existsSync(target)) continue;
    if ('link' in entry) symlinkSync(entry.link, target);
    else placeExecutable(entry.source, target);
  }

  const app = join(rootfs, 'app');
  for (const dir of ['bin', 'src'])
    cpSync(join(REPO_ROOT, dir), join(app, dir), { recursive: true, verbatimSymlinks: true });
  makeDirs(rootfs, 'app/dist');
  for (const file of DIST_FILES) {
    if (dirname(file) !== '.') makeDirs(rootfs, join('app/dist', dirname(file)));
    const source = file === 'warren-forwarder' ? parts.forwarder : join(REPO_ROOT, 'dist', file);
    copyFileSync(source, join(app, 'dist', file));
  }
  // The rest of the agent's bundle (bin/warren runs it while no source is newer: in the image
  // every mtime is the epoch, so it does), without this machine's compile caches.
  for (const chunk of readdirSync(join(REPO_ROOT, 'dist', 'cli'))) {
    if (chunk.endsWith('.mjs')) copyFileSync(join(REPO_ROOT, 'dist', 'cli', chunk), join(app, 'dist', 'cli', chunk));
  }
  copyFileSync(join(REPO_ROOT, 'package.json'), join(app, 'package.json'));
  productionNodeModules(app);
  symlinkSync('/app/bin/warren', join(rootfs, 'usr', 'local', 'bin', 'warren'));
}

/**
 * `relative` and each directory above it under `rootfs`, made when missing with `mode` for the
 * last and 0755 for the others, whatever the umask: the layer's bytes do not depend on it.
 */
function makeDirs(rootfs: string, relative: string, mode = 0o755): void {
  const parts = relative.split('/').filter((part) => part !== '');
  for (let i = 1; i <= parts.length; i++) {
    const dir = join(rootfs, ...parts.slice(0, i));
    if (existsSync(dir)) continue;
    mkdirSync(dir);
    chmodSync(dir, i === parts.length ? mode : 0o755);
  }
}

function placeExecutable(source: string, target: string): void {
  copyFileSync(source, target);
  chmodSync(target, 0o755);
}

/**
 * The shared objects `ldd` resolves for `executable`, the dynamic loader included, as ldd names
 * them (the path the loader and the executable ask for). None for a static executable; a library
 * ldd cannot find is refused rather than left out.
 */
export function sharedLibraries(executable: string): string[] {
  let text: string;
  try {
    text = execFileSync('ldd', [executable], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const output = `${(error as { stdout?: string }).stdout ?? ''}${(error as { stderr?: string }).stderr ?? ''}`;
    if (/not a dynamic executable|statically linked/.test(output)) return [];
    throw new Error(`ldd ${executable} failed: ${output.trim() || (error as Error).message}`, { cause: error });
  }
  const libraries: string[] = [];
  for (const line of text.split('\n')) {
    if (/=>\s*not found/.test(line)) throw new Error(`${executable} needs a library ldd cannot find: ${line.trim()}`);
    // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)";
    // the vDSO has no file.
    const path = /(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/.exec(line)?.[1];
    if (path !== undefined) libraries.push(path);
  }
  return libraries;
}

/**
 * node_modules with the production dependencies only, as npm decides them, offline (the registry
 * is not needed to leave packages out), install scripts off: the packages `npm ls --omit=dev`
 * lists are copied from this repository's node_modules (copying the others only to delete them
 * costs seconds), then `npm prune --omit=dev` tidies what a copy cannot (.bin links, npm's
 * hidden lockfile). The lockfile npm needs is left out of the image, as in deploy/Dockerfile.
 */
function productionNodeModules(app: string): void {
  const modules = join(REPO_ROOT, 'node_modules');
  if (!existsSync(modules)) throw new Error(`${modules} is missing: run \`npm ci\` first`);
  const npm = (args: readonly string[], cwd: string): string =>
    execFileSync('npm', [...args, '--offline', '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd,
      encoding: 'utf8',
      // npm's own `#!/usr/bin/env node` finds this Node.
      env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? '/usr/bin:/bin'}` },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
  const production = new Set(
    npm(['ls', '--omit=dev', '--all', '--parseable'], REPO_ROOT)
      .split('\n')
      .filter((line) => line !== ''),
  );
  cpSync(modules, join(app, 'node_modules'), {
    recursive: true,
    verbatimSymlinks: true,
    filter: (source) => {
      const kept = (path: string): boolean => {
        const root = packageRoot(relative(modules, path));
        return root === undefined || production.has(join(modules, root));
      };
      // A .bin link is kept with the package it runs: npm prune leaves a dangling one alone.
      if (basename(dirname(source)) === '.bin' && lstatSync(source).isSymbolicLink())
        return kept(resolve(dirname(source), readlinkSync(source)));
      return kept(source);
    },
  });
  copyFileSync(join(REPO_ROOT, 'package-lock.json'), join(app, 'package-lock.json'));
  npm(['prune', '--omit=dev', '--ignore-scripts'], app);
  rmSync(join(app, 'package-lock.json'));
  // A scope whose packages were all left out (@esbuild) stays as an empty directory.
  for (const entry of readdirSync(join(app, 'node_modules'))) {
    const scope = join(app, 'node_modules', entry);
    if (entry.startsWith('@') && readdirSync(scope).length === 0) rmdirSync(scope);
  }
}

/**
 * The package directory (relative to node_modules) that `path`, relative to node_modules, is in
 * or is: `a`, `@s/b`, `a/node_modules/@s/b`. Undefined for what belongs to no package (the
 * top, a scope directory, dot-entries such as .bin).
 */
export function packageRoot(path: string): string | undefined {
  const parts = path.split(sep).filter((part) => part !== '');
  let root: string[] | undefined;
  let i = 0;
  while (i < parts.length) {
    const part = parts[i] as string;
    if (part.startsWith('.')) return root?.join('/');
    const width = part.startsWith('@') ? 2 : 1;
    if (i + width > parts.length) return root?.join('/');
    root = parts.slice(0, i + width);
    i += width;
    if (parts[i] !== 'node_modules') break;
    i += 1;
  }
  return root?.join('/');
}

interface LayerBlob {
  readonly digest: string;
  readonly size: number;
  readonly diffId: string;
  readonly tarBytes: number;
}

/** Tars `rootfs` into a gzip'd layer in `blobs`, hashing the tar and the gzip as they stream. */
async function writeLayer(rootfs: string, blobs: string, gzipLevel: number): Promise<LayerBlob> {
  const entries = readdirSync(rootfs).sort();
  const tar = spawn('tar', ['--create', '--file=-', `--directory=${rootfs}`, ...DETERMINISTIC_TAR, ...entries], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr: Buffer[] = [];
  tar.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  const exited = new Promise<number | null>((resolveExit, reject) => {
    tar.once('error', reject);
    tar.once('close', resolveExit);
  });
  const uncompressed = new HashingStream();
  const compressed = new HashingStream();
  const temp = join(blobs, '.layer.tmp');
  try {
    await pipeline(tar.stdout, uncompressed, createGzip({ level: gzipLevel }), compressed, createWriteStream(temp));
  } catch (error) {
    tar.kill('SIGKILL');
    await exited.catch(() => undefined);
    throw error;
  }
  const code = await exited;
  if (code !== 0)
    throw new Error(
      `tar of the image's root filesystem failed (${code}): ${Buffer.concat(stderr).toString('utf8').trim()}`,
    );
  const digest = compressed.digest();
  renameSync(temp, join(blobs, digest.slice('sha256:'.length)));
  return { digest, size: compressed.bytes, diffId: uncompressed.digest(), tarBytes: uncompressed.bytes };
}

/** Passes bytes through, counting and hashing them (sha256). */
class HashingStream extends Transform {
  readonly #hash: Hash = createHash('sha256');
  bytes = 0;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#hash.update(chunk);
    this.bytes += chunk.length;
    callback(null, chunk);
  }

  /** `sha256:<hex>`; once the stream has ended. */
  digest(): string {
    return `sha256:${this.#hash.digest('hex')}`;
  }
}

/** A JSON blob named by its digest. */
function writeBlob(blobs: string, value: unknown): { digest: string; size: number } {
  const bytes = Buffer.from(JSON.stringify(value));
  const hex = createHash('sha256').update(bytes).digest('hex');
  writeFileSync(join(blobs, hex), bytes, { mode: 0o644 });
  return { digest: `sha256:${hex}`, size: bytes.length };
}

function writeJson(path: string, value: unknown): void {
  writeFileSync(path, JSON.stringify(value), { mode: 0o644 });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { arch: { type: 'string' }, out: { type: 'string' }, 'gzip-level': { type: 'string' } },
    strict: true,
  });
  const report = await buildImage({
    ...(values.arch === undefined ? {} : { arch: values.arch as ImageArch }),
    ...(values.out === undefined ? {} : { out: values.out }),
    ...(values['gzip-level'] === undefined ? {} : { gzipLevel: Number(values['gzip-level']) }),
  });
  const mb = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`;
  console.log(
    `built ${report.out} (${mb(report.archiveBytes)}; layer ${mb(report.layerBytes)} gzip'd from ${mb(report.layerTarBytes)}) in ${report.seconds.toFixed(1)} s\n` +
      `image ${report.reference} for linux/${report.arch}, manifest ${report.manifestDigest}\n` +
      `import it on a node: ctr -n k8s.io images import ${report.out}`,
  );
}
