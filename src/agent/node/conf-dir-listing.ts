/**
 * The CNI conf dir as the runtime reads it, for the config manager: config names in the runtime's
 * order, the primary (the named one, or the lexically first config that is not Warren's) and a
 * config that would shadow Warren's file.
 *
 * Guarantees: a file is told to be Warren's by its name or its marker, read bounded and
 * non-blocking (core/bounded-read.ts): a FIFO or a device named like a config is never waited on
 * or read without bound; it is not Warren's, so it can be the primary (the runtime would pick it
 * too), and reading it then reports what it is. Directories are skipped, as the runtime skips them.
 */
import { type Stats, existsSync, readdirSync, statSync } from 'node:fs';
import { basename, isAbsolute, join, resolve } from 'node:path';
import { readRegularFile } from '../../core/bounded-read.ts';
import { MAX_CONFIG_BYTES } from '../../cni/config-limits.ts';
import { isConfigName, isGeneratedConfig } from '../../cni/derived-config.ts';

export type Primary = { readonly path: string; readonly name: string } | undefined;

/** A primary named explicitly: absolute, or relative to the conf dir. */
export function primaryPath(confDir: string, given: string): string {
  return isAbsolute(given) ? given : resolve(confDir, given);
}

/** The primary: the named one, or the lexically first config in the conf dir that is not Warren's. */
export function findPrimary(confDir: string, output: string, named: string | undefined): Primary {
  if (named !== undefined) {
    const path = primaryPath(confDir, named);
    return existsSync(path) ? { path, name: basename(path) } : undefined;
  }
  for (const name of configNames(confDir)) {
    const path = join(confDir, name);
    if (isWarrens(path, output)) continue;
    return { path, name };
  }
  return undefined;
}

/** A config the runtime would load before Warren's (it sorts first), if any. */
export function shadowing(confDir: string, output: string): string | undefined {
  const mine = basename(output);
  const first = configNames(confDir).find((name) => name !== mine);
  return first !== undefined && first < mine ? first : undefined;
}

/** Config names in the conf dir, in the order the runtime considers them. */
function configNames(confDir: string): string[] {
  try {
    return readdirSync(confDir)
      .filter(isConfigName)
      .sort()
      .filter((name) => {
        const stat = statOrUndefined(join(confDir, name));
        return stat !== undefined && !stat.isDirectory();
      });
  } catch {
    return [];
  }
}

function isWarrens(path: string, output: string): boolean {
  if (path === output) return true;
  try {
    const read = readRegularFile(path, MAX_CONFIG_BYTES);
    return read.kind === 'read' && isGeneratedConfig(read.text);
  } catch {
    return false;
  }
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}
