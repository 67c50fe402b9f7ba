/**
 * Whether a plugin's PluginInfo can be used: a handler for its type, a name, a version both sides
 * speak, an endpoint inside the plugins directory, and its handler's own checks. Pure of state:
 * whether another socket holds the name is the reconciler's check, as it depends on what is
 * registered. A refusal's reason is told to the plugin as it is, so it names what is wrong.
 */
import { realpathSync } from 'node:fs';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { messageOf } from '../../core/errors.ts';
import type { PluginInfo } from '../../api/plugins/wire.ts';
import type { PluginHandler } from './handler.ts';

/** The longest path a unix socket address holds (sun_path, less its NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

export type InfoCheck =
  | { readonly ok: true; readonly handler: PluginHandler; readonly endpoint: string; readonly version: string }
  | { readonly ok: false; readonly reason: string };

/**
 * Whether a plugin's PluginInfo can be used, checked against the handlers and the plugins
 * directory, and if so its handler, endpoint (absolute) and version. A name held by another socket
 * is the reconciler's check, not this one: it depends on state.
 */
export function checkInfo(
  info: PluginInfo,
  socket: string,
  dir: string,
  handlers: ReadonlyMap<string, PluginHandler>,
): InfoCheck {
  const handler = handlers.get(info.type);
  if (handler === undefined) {
    const known = [...handlers.keys()].map((t) => JSON.stringify(t)).join(', ') || 'none';
    return { ok: false, reason: `unknown plugin type ${JSON.stringify(info.type)} (Warren knows ${known})` };
  }
  if (info.name.trim() === '') return { ok: false, reason: 'the plugin has an empty name' };
  const version = handler.versions.find((v) => info.supportedVersions.includes(v));
  if (version === undefined) {
    return {
      ok: false,
      reason:
        `no version in common for type ${JSON.stringify(info.type)}: the plugin supports ` +
        `[${info.supportedVersions.join(', ')}], Warren speaks [${handler.versions.join(', ')}]`,
    };
  }
  const endpoint = resolveEndpoint(info.endpoint, socket, dir);
  if (typeof endpoint !== 'string') return { ok: false, reason: endpoint.refusal };
  let refusal: string | undefined;
  try {
    refusal = handler.validate?.(info);
  } catch (error) {
    refusal = `the ${info.type} handler could not check it: ${messageOf(error)}`;
  }
  if (refusal !== undefined) return { ok: false, reason: refusal };
  return { ok: true, handler, endpoint, version };
}

/**
 * The absolute path of a plugin's endpoint (relative ones against its socket's directory; empty:
 * the socket itself), or why it cannot be used. Inside the plugins directory means inside both as
 * written and as the filesystem resolves it, so neither `..` nor a symlink leads out.
 */
export function resolveEndpoint(endpoint: string, socket: string, dir: string): string | { readonly refusal: string } {
  if (endpoint === '') return socket;
  const quoted = JSON.stringify(endpoint);
  if (endpoint.includes('\0')) return { refusal: `endpoint ${quoted} contains a NUL byte` };
  const path = resolve(dirname(socket), endpoint);
  const inside = (p: string, d: string): boolean => p.startsWith(d.endsWith(sep) ? d : d + sep);
  if (!inside(path, resolve(dir)) || !inside(realPath(path), realPath(dir))) {
    return { refusal: `endpoint ${quoted} (${path}) is outside the plugins directory ${dir}` };
  }
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) {
    return {
      refusal: `endpoint ${path} is longer than ${MAX_SOCKET_PATH_BYTES} bytes, more than a unix socket address holds`,
    };
  }
  return path;
}

/** The path with every symlink resolved, as far as it exists (an endpoint may not exist yet). */
function realPath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    const parent = dirname(path);
    return parent === path ? path : join(realPath(parent), basename(path));
  }
}
