/**
 * The registry's actual state: the plugins registered now, by registration socket, each with the
 * inode it was registered from, what it said of itself, the handler serving it and when.
 *
 * Guarantees: a plugin is here exactly while its handler's `register` has succeeded and its
 * `unregister` has not been called; at most one plugin per socket. `plugin` is the very object
 * the handler's `register` was given, and `unregister` and `describe` are given it too, so a
 * handler may key its own state on it.
 */
import type { PluginHandler, RegisteredPlugin } from './handler.ts';

export interface ActualPlugin {
  readonly socket: string;
  /** The desired state's generation of the socket it registered from: another is another plugin. */
  readonly generation: number;
  readonly ino: number;
  /** Its PluginInfo, the endpoint resolved and the version chosen. */
  readonly plugin: RegisteredPlugin;
  readonly handler: PluginHandler;
  /** ms since the epoch, on the registry's clock. */
  readonly registeredAt: number;
}

export class ActualState {
  readonly #plugins = new Map<string, ActualPlugin>();

  add(plugin: ActualPlugin): void {
    if (this.#plugins.has(plugin.socket))
      throw new Error(`${plugin.socket} is registered already: unregister it first`);
    this.#plugins.set(plugin.socket, plugin);
  }

  /** The plugin that was registered at the socket, or undefined when none was (a no-op). */
  remove(socket: string): ActualPlugin | undefined {
    const plugin = this.#plugins.get(socket);
    this.#plugins.delete(socket);
    return plugin;
  }

  get(socket: string): ActualPlugin | undefined {
    return this.#plugins.get(socket);
  }

  all(): ActualPlugin[] {
    return [...this.#plugins.values()];
  }

  get size(): number {
    return this.#plugins.size;
  }
}
