/**
 * Where containerd's CRI plugin looks for CNI plugins and configs, read from its config TOML:
 * the bin directories the `warren` executable must be installed in, the conf dir, and the gRPC
 * socket. The key moved between containerd's config versions:
 *
 *   version 1 (containerd 1.x, no `version`)  [plugins.cri.cni]                        bin_dir
 *   version 2 (containerd 1.x)                [plugins."io.containerd.grpc.v1.cri".cni] bin_dir
 *   version 3 (containerd 2.x)                [plugins."io.containerd.cri.v1.runtime".cni]
 *                                             bin_dirs (a list; 2.1 on), or bin_dir (deprecated)
 *
 * and each of them holds `conf_dir`. Keys left unset are containerd's defaults (/opt/cni/bin,
 * /etc/cni/net.d, /run/containerd/containerd.sock). `imports` are followed (paths relative to the
 * importing file, `*` in the file name part), each file read by its own version, a later file
 * overriding what an earlier one set, as containerd merges them.
 *
 * Guarantees: never throws. A missing main file is `absent` (the node may run another runtime);
 * one that cannot be read, is not TOML, or gives a key the wrong type is `unreadable` with a
 * reason naming the file, the line or the key, so the doctor can say so and go on with defaults.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { parse } from 'smol-toml';
import { messageOf } from '../../core/errors.ts';
import { isPlainObject } from '../../core/validate.ts';
import { DEFAULT_CONTAINERD_SOCKET } from '../../sources/containerd/socket.ts';
import { DEFAULT_CNI_CONF_DIR } from '../../agent/settings/table.ts';

export const DEFAULT_CONTAINERD_CONFIG = '/etc/containerd/config.toml';
/** containerd's defaults for the CNI keys (and every other runtime's: libcni's). */
export const DEFAULT_CNI_BIN_DIR = '/opt/cni/bin';

/** What a runtime configured with this file uses. */
export interface RuntimeCniSettings {
  readonly binDirs: readonly string[];
  readonly confDir: string;
  /** containerd's gRPC socket (`[grpc] address`). */
  readonly grpcAddress: string;
}

export type ContainerdConfigReading =
  | {
      readonly kind: 'read';
      readonly path: string;
      readonly files: readonly string[];
      readonly settings: RuntimeCniSettings;
    }
  | { readonly kind: 'absent'; readonly path: string }
  | { readonly kind: 'unreadable'; readonly path: string; readonly reason: string };

/** The table holding the CNI keys, by config version, newest first. */
const CNI_TABLES: Readonly<Record<number, readonly string[]>> = {
  1: ['cri'],
  2: ['io.containerd.grpc.v1.cri'],
  3: ['io.containerd.cri.v1.runtime'],
};

/** At most this many files, main and imports: a loop of imports stops here. */
const MAX_FILES = 32;

/** What one file sets; unset keys are left to the files before it, or to the defaults. */
export interface FileCniSettings {
  binDirs?: string[];
  confDir?: string;
  grpcAddress?: string;
  imports: string[];
}

class ConfigProblem extends Error {}

/** What one file sets, by its own version. Throws ConfigProblem naming the key that is wrong. */
export function cniSettingsOfToml(text: string, file: string): FileCniSettings {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (error) {
    const e = error as { line?: number; column?: number };
    const first = messageOf(error).split('\n')[0] ?? 'not TOML';
    throw new ConfigProblem(
      `${file} is not valid TOML: ${first}${e.line === undefined ? '' : ` (line ${e.line}, column ${e.column})`}`,
    );
  }
  const version = doc.version ?? 1;
  if (typeof version !== 'number' || CNI_TABLES[version] === undefined)
    throw new ConfigProblem(
      `${file}: version ${String(version)} is not a containerd config version this doctor knows (1, 2, 3)`,
    );
  const found: FileCniSettings = { imports: [] };
  const plugins = doc.plugins;
  for (const name of CNI_TABLES[version] ?? []) {
    const cni = isPlainObject(plugins) && isPlainObject(plugins[name]) ? plugins[name].cni : undefined;
    if (cni === undefined) continue;
    const at = `${file}: plugins."${name}".cni`;
    if (!isPlainObject(cni)) throw new ConfigProblem(`${at} is not a table`);
    if (cni.bin_dirs !== undefined) {
      if (!Array.isArray(cni.bin_dirs) || !cni.bin_dirs.every((d) => typeof d === 'string'))
        throw new ConfigProblem(`${at}.bin_dirs must be a list of paths`);
      found.binDirs = cni.bin_dirs as string[];
    } else if (cni.bin_dir !== undefined) {
      if (typeof cni.bin_dir !== 'string') throw new ConfigProblem(`${at}.bin_dir must be a path`);
      found.binDirs = [cni.bin_dir];
    }
    if (cni.conf_dir !== undefined) {
      if (typeof cni.conf_dir !== 'string') throw new ConfigProblem(`${at}.conf_dir must be a path`);
      found.confDir = cni.conf_dir;
    }
    break;
  }
  if (isPlainObject(doc.grpc) && doc.grpc.address !== undefined) {
    if (typeof doc.grpc.address !== 'string') throw new ConfigProblem(`${file}: grpc.address must be a path`);
    if (doc.grpc.address !== '') found.grpcAddress = doc.grpc.address;
  }
  if (doc.imports !== undefined) {
    if (!Array.isArray(doc.imports) || !doc.imports.every((i) => typeof i === 'string'))
      throw new ConfigProblem(`${file}: imports must be a list of paths`);
    found.imports = doc.imports as string[];
  }
  return found;
}

/** The files an import names: a path, or `*` in its last part matched against a directory's listing. */
function resolveImport(spec: string, from: string): string[] {
  const path = isAbsolute(spec) ? spec : resolve(dirname(from), spec);
  const name = basename(path);
  if (!name.includes('*')) return [path];
  const pattern = new RegExp(
    `^${name
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]*')}$`,
  );
  let entries: string[];
  try {
    entries = readdirSync(dirname(path));
  } catch {
    return []; // a glob over a missing directory matches nothing, as in containerd
  }
  return entries
    .filter((e) => pattern.test(e))
    .sort()
    .map((e) => join(dirname(path), e));
}

/** Reads containerd's config at `path` and its imports; see the module header. */
export function readContainerdConfig(path: string): ContainerdConfigReading {
  const settings: { binDirs: readonly string[]; confDir: string; grpcAddress: string } = {
    binDirs: [DEFAULT_CNI_BIN_DIR],
    confDir: DEFAULT_CNI_CONF_DIR,
    grpcAddress: DEFAULT_CONTAINERD_SOCKET,
  };
  const pending = [path];
  const seen: string[] = [];
  try {
    while (pending.length > 0) {
      const file = pending.shift() as string;
      if (seen.includes(file)) continue;
      if (seen.length >= MAX_FILES) throw new ConfigProblem(`${path}: more than ${MAX_FILES} files through imports`);
      seen.push(file);
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (error) {
        if (file === path && (error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent', path };
        throw new ConfigProblem(`${file} cannot be read: ${messageOf(error)}`);
      }
      const found = cniSettingsOfToml(text, file);
      if (found.binDirs !== undefined) settings.binDirs = found.binDirs;
      if (found.confDir !== undefined) settings.confDir = found.confDir;
      if (found.grpcAddress !== undefined) settings.grpcAddress = found.grpcAddress;
      for (const spec of found.imports) pending.push(...resolveImport(spec, file));
    }
  } catch (error) {
    return { kind: 'unreadable', path, reason: messageOf(error) };
  }
  return { kind: 'read', path, files: seen, settings };
}
