/**
 * Real network namespaces and bridges for end-to-end tests, with unique names and guaranteed
 * removal (registered for deletion at process exit as well as by the returned cleanup).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { sh } from './processes.ts';

const namespaces = new Set<string>();
const links = new Set<string>();

process.on('exit', () => {
  for (const ns of namespaces) {
    try {
      execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
    } catch {
      // already gone
    }
  }
  for (const link of links) {
    try {
      execFileSync('ip', ['link', 'del', link], { stdio: 'ignore' });
    } catch {
      // already gone
    }
  }
});

export function uniqueName(prefix: string, length = 15): string {
  return `${prefix}${randomBytes(8).toString('hex')}`.slice(0, length);
}

export async function createNetns(): Promise<{ name: string; path: string }> {
  const name = uniqueName('wrn-test-', 24);
  await sh('ip', ['netns', 'add', name]);
  namespaces.add(name);
  // IPv6 duplicate address detection would hold addresses tentative for a second or more.
  await sh('ip', [
    'netns',
    'exec',
    name,
    'sysctl',
    '-q',
    '-w',
    'net.ipv6.conf.all.accept_dad=0',
    'net.ipv6.conf.default.accept_dad=0',
  ]);
  return { name, path: `/var/run/netns/${name}` };
}

export async function deleteNetns(name: string): Promise<void> {
  namespaces.delete(name);
  await sh('ip', ['netns', 'del', name]).catch(() => undefined);
}

/** Registers a bridge (created by the bridge plugin) for deletion; returns its name. */
export function bridgeName(): string {
  const name = uniqueName('wrnbr');
  links.add(name);
  return name;
}

export async function deleteLink(name: string): Promise<void> {
  links.delete(name);
  await sh('ip', ['link', 'del', name]).catch(() => undefined);
}

/** Global-scope addresses on an interface inside a namespace. */
export async function addressesIn(ns: string, ifname: string): Promise<string[]> {
  const out = await sh('ip', ['netns', 'exec', ns, 'ip', '-j', 'addr', 'show', 'dev', ifname]);
  const parsed = JSON.parse(out) as Array<{ addr_info: Array<{ local: string; prefixlen: number; scope: string }> }>;
  return parsed.flatMap((l) => l.addr_info.filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`));
}
