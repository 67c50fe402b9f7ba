/**
 * What a plugin type plugs into the registry: the versions Warren speaks for that type, an optional
 * check of a plugin's PluginInfo beyond the registry's own, and starting and stopping the use of a
 * registered plugin. The registry calls `register` and `unregister` for one socket at a time, and
 * always `unregister` before it registers that socket again; a handler never sees two calls for
 * one socket at once.
 */
import type { PluginInfo } from '../../api/plugins/wire.ts';

export interface RegisteredPlugin {
  readonly socket: string; // registration socket path
  readonly info: PluginInfo;
  // absolute path of the plugin's service socket (info.endpoint resolved; the socket itself when empty)
  readonly endpoint: string;
  readonly version: string; // the version chosen: the first of handler.versions the plugin supports
}

/** A handler's refusal of a plugin, with the reason the plugin is told. */
export interface HandlerRefusal {
  readonly refused: string;
}

export interface PluginHandler {
  readonly type: string;
  /** Versions Warren speaks, most preferred first. */
  readonly versions: readonly string[];
  /** A reason to refuse this plugin beyond the registry's own checks, or undefined. */
  validate?(info: PluginInfo): string | undefined;
  /**
   * Starts using the plugin, or refuses it (`refused`: told to the plugin, not asked again until
   * its socket is replaced), for what only talking to it can show. A throw is a failed attempt
   * (retried with backoff), not a refusal.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a handler that accepts returns nothing
  register(plugin: RegisteredPlugin): Promise<void | HandlerRefusal>;
  /** Stops using it. Never throws. */
  unregister(plugin: RegisteredPlugin): Promise<void>;
  /** What this type reports about a registered plugin (shown by `warren plugins` as PluginEntry.detail). */
  describe?(plugin: RegisteredPlugin): Readonly<Record<string, unknown>>;
}
