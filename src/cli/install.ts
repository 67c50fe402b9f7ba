/**
 * `warren install --cni-bin-dir DIR`: puts the CNI plugin where a runtime finds it, self-contained,
 * so the node needs no Node.js of its own:
 *
 *   DIR/warren              the native forwarder (dist/warren-forwarder): the hot path
 *   DIR/warren.d/node       this Node's executable, which the forwarder falls back to
 *   DIR/warren.d/warren.cjs the TypeScript plugin bundle (dist/warren), run by that node
 *
 * Guarantees:
 * - Atomic per file: each is written under a temp name in its final directory (mode 0755),
 *   fsync'd, renamed over the target, and the directory fsync'd: a runtime running `warren` at
 *   any instant finds the old file or the new one, whole, never a half-written one, and a crash
 *   leaves at most a stray temp file (dot-named, never a plugin name), never a truncated plugin.
 * - The fallback first, the forwarder last: a forwarder (old or new) that falls back always finds
 *   a whole node and bundle.
 * - Refuses, changing nothing, when the build is missing (`npm run build` makes both files).
 * - `--link` symlinks the node instead of copying its ~120 MB: for development and tests on a
 *   machine that has this Node; the default copies, because a node of the cluster has none.
 * Idempotent: installing again replaces each file whole with the same content.
 */
import {
  closeSync,
  copyFileSync,
  constants,
  existsSync,
  fsyncSync,
  lstatSync,
  openSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  chmodSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { WarrenError } from '../core/errors.ts';
import { jsonText, safe } from './format.ts';
import { UsageError } from './usage.ts';
import type { CliIO } from './io.ts';
import { makeDirectory } from '../core/make-directory.ts';

/** Where `npm run build` leaves what is installed. */
export const DIST_DIR = fileURLToPath(new URL('../../dist/', import.meta.url));

/** The names in the CNI bin directory: the runtime runs `warren`, the config's `type`. */
export const INSTALLED = {
  forwarder: 'warren',
  fallbackDir: 'warren.d',
  node: 'node',
  bundle: 'warren.cjs',
} as const;

export interface InstallOptions {
  readonly cniBinDir: string;
  /** Holds warren-forwarder and warren, as `npm run build` makes them. Default DIST_DIR. */
  readonly from?: string | undefined;
  /** The Node executable to carry; default this process's, symlinks resolved. */
  readonly node?: string;
  /** Symlink the node rather than copy it. */
  readonly link?: boolean;
}

export interface InstalledFile {
  readonly path: string;
  /** What it was made from. */
  readonly source: string;
  /** A copy, or a symlink to the source. */
  readonly kind: 'copy' | 'symlink';
  /** Size of the file (of its target, for a symlink). */
  readonly bytes: number;
}

export interface InstallReport {
  readonly cniBinDir: string;
  /** In the order they were installed. */
  readonly installed: readonly InstalledFile[];
}

/** Installs the plugin into `cniBinDir`; see the module header for the order and guarantees. */
export function install(options: InstallOptions): InstallReport {
  const from = resolve(options.from ?? DIST_DIR);
  const dir = resolve(options.cniBinDir);
  const forwarder = join(from, 'warren-forwarder');
  const bundle = join(from, 'warren');
  for (const [file, what] of [
    [forwarder, 'the native forwarder'],
    [bundle, 'the TypeScript plugin bundle'],
  ] as const) {
    if (!existsSync(file))
      throw new WarrenError('NOT_FOUND', `${file} (${what}) is missing: run \`npm run build\` first`);
  }
  const node = realpathSync(options.node ?? process.execPath);
  const fallback = join(dir, INSTALLED.fallbackDir);
  makeDirectory(fallback, 0o755);
  const installed = [
    placeFile(node, join(fallback, INSTALLED.node), options.link === true ? 'symlink' : 'copy'),
    placeFile(bundle, join(fallback, INSTALLED.bundle), 'copy'),
  ];
  syncDirectory(fallback);
  installed.push(placeFile(forwarder, join(dir, INSTALLED.forwarder), 'copy'));
  syncDirectory(dir);
  return { cniBinDir: dir, installed };
}

/**
 * `source` at `target`, atomically: a temp name beside the target, written and fsync'd (a copy) or
 * made (a symlink), then renamed over it. The caller fsyncs the directory.
 */
function placeFile(source: string, target: string, kind: InstalledFile['kind']): InstalledFile {
  const temp = join(dirname(target), `.${basename(target)}.tmp-${process.pid}`);
  rmSync(temp, { force: true }); // a stray one of a crashed install with this pid
  try {
    if (kind === 'symlink') {
      symlinkSync(source, temp);
    } else {
      copyFileSync(source, temp, constants.COPYFILE_EXCL);
      chmodSync(temp, 0o755);
      const fd = openSync(temp, 'r');
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
    renameSync(temp, target);
  } catch (error) {
    rmSync(temp, { force: true });
    throw new WarrenError('IO_FAILURE', `could not install ${target} from ${source}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  return { path: target, source, kind, bytes: statSync(target).size };
}

function syncDirectory(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Removes what `install` put into `cniBinDir`, in the reverse order: the forwarder first (the
 * runtime runs nothing of Warren's after that), then the fallback directory. Only Warren's names
 * are touched; what is missing is skipped. The removed paths, in order.
 */
export function uninstallPlugin(cniBinDir: string): string[] {
  const dir = resolve(cniBinDir);
  const removed: string[] = [];
  for (const path of [join(dir, INSTALLED.forwarder), join(dir, INSTALLED.fallbackDir)]) {
    if (!existsSync(path) && !isDanglingLink(path)) continue;
    rmSync(path, { recursive: true, force: true });
    removed.push(path);
  }
  if (removed.length > 0) syncDirectory(dir);
  return removed;
}

function isDanglingLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

const FLAGS = {
  'cni-bin-dir': { type: 'string' },
  from: { type: 'string' },
  link: { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
} as const;

/** `warren install`: the command line over `install`. */
export async function runInstall(argv: readonly string[], io: CliIO): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: FLAGS, strict: true, allowPositionals: false });
  const cniBinDir = values['cni-bin-dir'];
  if (cniBinDir === undefined || cniBinDir === '')
    throw new UsageError("install needs --cni-bin-dir DIR (the runtime's CNI bin directory, e.g. /opt/cni/bin)");
  const report = install({ cniBinDir, from: values.from, link: values.link });
  if (values.json) {
    io.out(jsonText(report));
    return 0;
  }
  for (const file of report.installed) {
    io.out(
      safe`installed ${file.path} (${file.bytes} bytes, ${file.kind === 'symlink' ? 'symlink to' : 'from'} ` +
        safe`${file.source})\n`,
    );
  }
  return 0;
}
