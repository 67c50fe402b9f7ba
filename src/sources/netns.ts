/**
 * What the node can see of network namespaces. A namespace file being gone is proof that the
 * container's network is torn down — but only inside a directory the agent can really observe.
 * A directory that is missing, unreadable, or not a mount point (the usual sign that the host's
 * netns directory was not mounted where the agent runs) observes nothing, and a namespace under
 * it is never judged gone. `/proc/<pid>/ns/net` paths are never judged either: a process
 * exiting does not prove its namespace is gone.
 *
 * Directories are compared by their real paths, not their spelling: a namespace recorded as
 * `/run/netns/NAME` (podman) and one recorded as `/var/run/netns/NAME` (iproute2, containerd's
 * CRI) are in one directory where `/var/run` links to `/run`, and either configured spelling
 * covers both. The namespace file itself may be gone, so it is its parent directory that is
 * canonicalised; a parent that cannot be resolved observes nothing.
 */
import { lstatSync, readFileSync, readdirSync, realpathSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * Network namespace directories judged by default: podman's spelling and iproute2's and
 * containerd CRI's. Where /var/run links to /run (nearly everywhere) they are one directory, and
 * the observer compares real paths, so either covers a namespace recorded under the other; both
 * are listed for the hosts where they are not the same.
 */
export const DEFAULT_NETNS_DIRS: readonly string[] = ['/run/netns', '/var/run/netns'];

export type NetnsObservation =
  | { readonly kind: 'exists' }
  | { readonly kind: 'gone' }
  | { readonly kind: 'unobservable'; readonly reason: string };

export interface DirectoryObservability {
  readonly dir: string;
  readonly observable: boolean;
  readonly reason?: string;
}

/** Mount points of this process's mount namespace, decoded (octal escapes such as \040). */
export function mountPoints(mountinfo = '/proc/self/mountinfo'): Set<string> {
  const points = new Set<string>();
  let text: string;
  try {
    text = readFileSync(mountinfo, 'utf8');
  } catch {
    return points;
  }
  for (const line of text.split('\n')) {
    const field = line.split(' ')[4];
    if (field) points.add(field.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8))));
  }
  return points;
}

function realpathOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

export class NetnsObserver {
  readonly #dirs: readonly string[];
  readonly #mountinfo: string;

  /** `dirs`: directories whose namespaces may be judged (e.g. /var/run/netns). */
  constructor(dirs: readonly string[], mountinfo = '/proc/self/mountinfo') {
    this.#dirs = dirs.map((d) => resolve(d));
    this.#mountinfo = mountinfo;
  }

  /** The configured directories and whether each can be observed right now. */
  directories(): DirectoryObservability[] {
    const mounts = mountPoints(this.#mountinfo);
    return this.#dirs.map((dir) => ({ dir, ...this.#check(dir, mounts) }));
  }

  #check(dir: string, mounts: Set<string>): { observable: boolean; reason?: string } {
    let real: string;
    try {
      real = realpathSync(dir);
      readdirSync(real);
    } catch (error) {
      return {
        observable: false,
        reason: `${dir} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
      };
    }
    if (!mounts.has(real))
      return {
        observable: false,
        reason: `${dir} is not a mount point here, so it may not show the host's namespaces`,
      };
    return { observable: true };
  }

  /**
   * The configured directory that `parent` is, by spelling or else by real path; undefined when
   * it is none of them or cannot be resolved (a vanished directory proves nothing).
   */
  #watchedDirOf(parent: string): string | undefined {
    const spelled = this.#dirs.find((d) => d === parent);
    if (spelled !== undefined) return spelled;
    const real = realpathOrUndefined(parent);
    if (real === undefined) return undefined;
    return this.#dirs.find((d) => realpathOrUndefined(d) === real);
  }

  /** Judges one recorded netns path; `cache` shares directory checks across one audit. */
  observe(
    path: string | undefined,
    cache = new Map<string, { observable: boolean; reason?: string }>(),
  ): NetnsObservation {
    if (path === undefined || path === '') return { kind: 'unobservable', reason: 'no network namespace was recorded' };
    if (/^\/proc\/[0-9]+\/(task\/[0-9]+\/)?ns\/net$/.test(path)) {
      return {
        kind: 'unobservable',
        reason: `${path} names a process's namespace; a process exiting does not prove the namespace is gone`,
      };
    }
    const abs = resolve(path);
    const parent = dirname(abs);
    const dir = this.#watchedDirOf(parent);
    if (dir === undefined) return { kind: 'unobservable', reason: `${parent} is not a watched netns directory` };
    let verdict = cache.get(dir);
    if (verdict === undefined) {
      verdict = this.#check(dir, mountPoints(this.#mountinfo));
      cache.set(dir, verdict);
    }
    if (!verdict.observable) return { kind: 'unobservable', reason: verdict.reason ?? `${dir} is not observable` };
    try {
      lstatSync(abs);
      return { kind: 'exists' };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return { kind: 'gone' };
      return { kind: 'unobservable', reason: `${abs} cannot be checked (${code ?? String(error)})` };
    }
  }
}
