/**
 * Running CNI plugins the way a runtime does: Warren as installed (the native forwarder, falling
 * back to the TypeScript plugin beside it), the TypeScript plugin alone, or the real `bridge`
 * plugin from containernetworking-plugins with Warren as its IPAM.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { buildPlugin } from '../../scripts/build.ts';
import { CHILD_PATH, REPO, WARREN_BIN, run, tempDir } from './processes.ts';

export const REFERENCE_PLUGINS = '/usr/lib/cni';

/**
 * A CNI_PATH directory holding Warren as `warren install --cni-bin-dir DIR --link` installs it
 * (DIR/warren the forwarder, DIR/warren.d/ the TypeScript plugin and a link to this Node), built
 * and installed once per test process from the current sources so a test never runs a stale one.
 * Every call through `warren()` or a reference plugin goes through the installed forwarder.
 */
let binDir: string | undefined;
export function cniBinDir(): string {
  if (binDir === undefined) {
    buildPlugin();
    const dir = tempDir('warren-cnibin-');
    const r = spawnSync(process.execPath, [WARREN_BIN, 'install', '--cni-bin-dir', dir, '--link'], {
      cwd: REPO,
      env: { PATH: CHILD_PATH },
      encoding: 'utf8',
    });
    if (r.status !== 0)
      throw new Error(`warren install --cni-bin-dir ${dir} --link failed (${r.status}): ${r.stderr}${r.stdout}`);
    binDir = dir;
  }
  return binDir;
}

export function haveReferencePlugins(): boolean {
  return existsSync(join(REFERENCE_PLUGINS, 'bridge'));
}

export interface CniCall {
  readonly command: string;
  readonly containerID?: string;
  readonly netns?: string;
  readonly ifname?: string;
  readonly args?: string;
  readonly config: unknown;
  /** Extra or replacement variables; undefined values remove a variable. */
  readonly env?: Record<string, string | undefined>;
}

export interface CniReply {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout parsed, when it is JSON. */
  readonly json: Record<string, unknown> | undefined;
}

function cniEnv(call: CniCall): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: CHILD_PATH,
    CNI_COMMAND: call.command,
    CNI_PATH: `${cniBinDir()}:${REFERENCE_PLUGINS}`,
  };
  if (call.containerID !== undefined) env.CNI_CONTAINERID = call.containerID;
  if (call.netns !== undefined) env.CNI_NETNS = call.netns;
  if (call.ifname !== undefined) env.CNI_IFNAME = call.ifname;
  if (call.args !== undefined) env.CNI_ARGS = call.args;
  for (const [k, v] of Object.entries(call.env ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

async function invoke(executable: string, call: CniCall, args: readonly string[] = []): Promise<CniReply> {
  const stdin = typeof call.config === 'string' ? call.config : JSON.stringify(call.config);
  const r = await run(executable, args, { env: cniEnv(call), stdin });
  let json: Record<string, unknown> | undefined;
  try {
    json = r.stdout.trim() === '' ? undefined : (JSON.parse(r.stdout) as Record<string, unknown>);
  } catch {
    json = undefined;
  }
  return { code: r.code, stdout: r.stdout, stderr: r.stderr, json };
}

/** Runs Warren as installed (the forwarder) as an IPAM plugin. */
export function warren(call: CniCall): Promise<CniReply> {
  return invoke(join(cniBinDir(), 'warren'), call);
}

/** Runs the TypeScript plugin alone, as the forwarder falls back to it: DIR/warren.d/node DIR/warren.d/warren.cjs. */
export function typescriptPlugin(call: CniCall): Promise<CniReply> {
  const fallback = join(cniBinDir(), 'warren.d');
  return invoke(join(fallback, 'node'), call, [join(fallback, 'warren.cjs')]);
}

/** Runs a reference plugin (bridge, ...) that delegates IPAM to Warren through CNI_PATH. */
export function reference(plugin: string, call: CniCall): Promise<CniReply> {
  return invoke(join(REFERENCE_PLUGINS, plugin), call);
}

/** The addresses of a CNI result, without prefix length. */
export function resultAddresses(reply: CniReply): string[] {
  const ips = (reply.json?.ips ?? []) as Array<{ address: string }>;
  return ips.map((ip) => ip.address.slice(0, ip.address.indexOf('/')));
}
