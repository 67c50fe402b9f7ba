/**
 * `warren podman-events`: Warren's podman adapter. It follows podman (podman-feed.ts) and serves
 * the `warren.event-source` plugin on a socket in Warren's plugins directory (plugin-server.ts),
 * until its signal aborts.
 *
 * Guarantees:
 * - The plugins directory is created if missing (0755 parents, as `mkdir -p`), so the adapter may
 *   start before Warren's agent; the agent registers it when it sees the socket, and again after
 *   the agent restarts (the socket stays; the agent finds it present at start).
 * - The adapter answers for allocations whose network namespace path begins with one of
 *   `netnsPrefixes` (podman 4.3 rootful with CNI names namespaces /run/netns/netns-<uuid>).
 * - On abort the socket is removed (if still ours) and the `podman events` child stopped, and the
 *   returned promise resolves; a failure to serve at all rejects it, with the follower stopped.
 */
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Clock } from '../../../core/clock.ts';
import { servePlugin } from '../plugin-server.ts';
import { PodmanFeed } from './podman-feed.ts';
import { makeDirectory } from '../../../core/make-directory.ts';

/** The adapter's name in its PluginInfo. */
export const PODMAN_ADAPTER_NAME = 'podman';
/** The socket's name in the plugins directory, by default. */
export const DEFAULT_PODMAN_SOCKET_NAME = 'warren-podman.sock';
/** Where podman (rootful, CNI backend) puts container network namespaces: /run/netns/netns-<uuid>. */
export const DEFAULT_PODMAN_NETNS_PREFIXES: readonly string[] = ['/run/netns/netns-'];

export interface PodmanAdapterOptions {
  /** Warren's plugins directory (the agent's --plugins-dir). */
  readonly pluginsDir: string;
  /** The socket's file name in it. Default `warren-podman.sock`. */
  readonly socketName?: string | undefined;
  /** The podman binary. Default `podman` (found on PATH). */
  readonly podman?: string | undefined;
  /** podman's environment (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF, …). Default this process's. */
  readonly env?: NodeJS.ProcessEnv;
  /** Default /run/netns/netns-. */
  readonly netnsPrefixes?: readonly string[] | undefined;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly signal: AbortSignal;
}

/** Serves podman's events to Warren until `signal` aborts (see the header). */
export async function runPodmanAdapter(o: PodmanAdapterOptions): Promise<void> {
  if (o.signal.aborted) return;
  const dir = resolve(o.pluginsDir);
  makeDirectory(dir, 0o777);
  const feed = new PodmanFeed({
    podman: o.podman,
    env: o.env,
    logger: o.logger.child({ component: 'podman-feed' }),
    clock: o.clock,
  });
  feed.start();
  try {
    const server = await servePlugin({
      socket: join(dir, o.socketName ?? DEFAULT_PODMAN_SOCKET_NAME),
      name: PODMAN_ADAPTER_NAME,
      netnsPrefixes: o.netnsPrefixes ?? DEFAULT_PODMAN_NETNS_PREFIXES,
      feed,
      logger: o.logger,
      clock: o.clock,
    });
    try {
      await new Promise<void>((done) => {
        if (o.signal.aborted) done();
        else o.signal.addEventListener('abort', () => done(), { once: true });
      });
    } finally {
      await server.close();
    }
  } finally {
    await feed.close();
  }
}
