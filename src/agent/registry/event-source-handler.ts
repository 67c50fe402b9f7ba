/**
 * The handler of plugin type `warren.event-source`: a registered runtime adapter's stream of
 * container lifecycle events, followed by an EventSourceClient and fed into the one release
 * pipeline, where the same rule as containerd's judges it (a deletion releases; an exit waits for
 * the namespace) over only the allocations the adapter answers for.
 *
 * Registering asks the adapter for one listing first and refuses it (telling it why) when the
 * namespace prefixes it declares overlap another runtime's (netns-scopes.ts); an adapter that
 * cannot list yet is registered, and its first listing is judged the same way when it comes (a
 * refused listing is never applied: the stream is reopened with backoff, and status says why).
 * Then it starts the client and returns (the client connects, lists and reconnects on its own,
 * forever); unregistering stops it and waits until its loop has ended, so no intent from an
 * unregistered adapter is queued after `unregister` resolves.
 */
import type { Logger } from 'pino';
import { EVENT_SOURCE_TYPE, EVENT_SOURCE_VERSIONS } from '../../api/plugins/wire.ts';
import { ExponentialBackoff } from '../../core/backoff.ts';
import type { Clock } from '../../core/clock.ts';
import { EventSourceClient, listOnce } from '../../sources/plugins/event-source-client.ts';
import type { ReleasePipeline } from '../release/pipeline.ts';
import { consumeRuntimeAdapter } from '../release/consumers.ts';
import type { HandlerRefusal, PluginHandler, RegisteredPlugin } from './handler.ts';
import type { NetnsScopes } from '../release/netns-scopes.ts';

export interface EventSourceHandlerOptions {
  readonly pipeline: ReleasePipeline;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Asked of each adapter; a stream silent for three of them is reopened. Default 10 s. */
  readonly heartbeatMs?: number;
  /** Which runtime answers for which namespaces: an adapter may declare only its own. */
  readonly scopes: NetnsScopes;
  /** Bound on the listing asked for at registration, ms. Default 2000. */
  readonly listTimeoutMs?: number;
}

interface Following {
  readonly client: EventSourceClient;
  readonly abort: AbortController;
  /** Ends once the client's loop has. */
  readonly done: Promise<void>;
}

export class EventSourceHandler implements PluginHandler {
  readonly type = EVENT_SOURCE_TYPE;
  readonly versions = EVENT_SOURCE_VERSIONS;
  readonly #o: EventSourceHandlerOptions;
  /** The adapters followed now, by registration socket. */
  readonly #following = new Map<string, Following>();

  constructor(options: EventSourceHandlerOptions) {
    this.#o = options;
  }

  // biome-ignore lint/suspicious/noConfusingVoidType: a handler that accepts returns nothing
  async register(plugin: RegisteredPlugin): Promise<void | HandlerRefusal> {
    await this.unregister(plugin);
    const name = plugin.info.name;
    const logger = this.#o.logger.child({ source: 'plugin', plugin: name });
    const listing = await listOnce(plugin.endpoint, this.#o.listTimeoutMs ?? 2_000);
    if ('failed' in listing) {
      logger.debug(
        { reason: listing.failed },
        'the adapter could not list at registration; its first listing will be judged when it comes',
      );
    } else {
      const refused = this.#o.scopes.claim(name, listing.netnsPrefixes);
      if (refused !== undefined) return { refused };
    }
    const client = new EventSourceClient({
      endpoint: plugin.endpoint,
      name,
      clock: this.#o.clock,
      backoff: new ExponentialBackoff({ initialMs: 500, maxMs: 30_000 }),
      logger,
      heartbeatMs: this.#o.heartbeatMs,
    });
    const abort = new AbortController();
    const done = consumeRuntimeAdapter(
      name,
      client.events(abort.signal),
      this.#o.pipeline,
      this.#o.scopes,
      this.#o.clock,
    ).catch((error: unknown) => {
      logger.error({ err: error }, 'runtime adapter stream stopped');
    });
    this.#following.set(plugin.socket, { client, abort, done });
  }

  async unregister(plugin: RegisteredPlugin): Promise<void> {
    const following = this.#following.get(plugin.socket);
    if (following === undefined) return;
    this.#following.delete(plugin.socket);
    following.abort.abort();
    await following.done;
  }

  describe(plugin: RegisteredPlugin): Readonly<Record<string, unknown>> {
    const following = this.#following.get(plugin.socket);
    if (following === undefined) return {};
    // The queue is shared by every runtime's container intents: the agent's status shows it once.
    const { released, exited } = this.#o.pipeline.containerStatus(plugin.info.name);
    return { stream: following.client.status(), released, exited };
  }
}
