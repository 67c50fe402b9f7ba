/**
 * Mount points, as the tests' harnesses clean up after real runtimes (containerd's sandbox
 * overlays and shm, podman's storage): read from this process's mountinfo, unescaped, and
 * unmounted deepest first.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Mount points in this mount namespace, unescaped (mountinfo writes space as \040). */
export function mountPoints(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) =>
      (line.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_, octal: string) =>
        String.fromCharCode(parseInt(octal, 8)),
      ),
    );
}

/** Mount points at or below `dir`. */
export function mountsUnder(dir: string): string[] {
  return mountPoints().filter((m) => m === dir || m.startsWith(`${dir}/`));
}

export function umount(path: string): void {
  const r = spawnSync('umount', [path], { encoding: 'utf8' });
  // Still busy: detach it, so the directory can be removed and the mount goes when unused.
  if (r.status !== 0) spawnSync('umount', ['-l', path], { encoding: 'utf8' });
}

/** Unmounts everything mounted at or below `dir`, deepest first (a mount inside another goes before it). */
export function unmountUnder(dir: string): void {
  for (const m of mountsUnder(dir).sort((a, b) => b.length - a.length)) umount(m);
}
