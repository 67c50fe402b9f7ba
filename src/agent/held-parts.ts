/**
 * What a started agent holds that stop() must undo (`HeldParts`), each set by agent.ts's start the
 * moment it exists, and the undoing of it (`stopHeldParts`), from the socket inwards: the CNI config
 * manager first (with --cleanup-config-on-exit the runtime stops calling Warren before the socket
 * goes), the metrics server, the API server and the agent's own socket, the release sources, the
 * store, a handed-back node's state, and the instance lock last. Every step runs even when one
 * before it failed (a part that throws while stopping must not leave the socket served, the store
 * open or the lock held); it rejects afterwards with the first failure. Each part is taken out as it
 * is stopped, so stopping twice stops nothing twice.
 */
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { defined } from '../core/defined.ts';
import type { Store } from '../store/store.ts';
import type { CniConfigManager } from './node/cni-config-manager.ts';
import type { NodeHandBack } from './node/hand-back.ts';
import type { ReleaseWiring } from './release-wiring.ts';
import { type OwnSocket, closeServer } from './server/socket.ts';
import type { InstanceLock } from './settings/instance-lock.ts';

export interface HeldParts {
  lock?: InstanceLock | undefined;
  store?: Store | undefined;
  /** `warren uninstall`: set once the node was handed back (now or before this start). */
  handBack?: NodeHandBack | undefined;
  /** The release pipeline and its sources. */
  releases?: ReleaseWiring | undefined;
  /** Keeps Warren's config in the CNI conf dir, when told to. */
  cniConfig?: CniConfigManager | undefined;
  /** The API server, on the CNI socket once it listens. */
  server?: Server | undefined;
  /** Health, metrics and the dashboard, on their TCP address; undefined when off. */
  metricsServer?: Server | undefined;
  /** The socket this agent listens on; undefined until it does. */
  socket?: OwnSocket | undefined;
}

/** The state a handed-back node removes besides the state directory's files: the database, the journal. */
export interface HandedBackState {
  readonly database: string | undefined;
  readonly journalDir: string;
}

export async function stopHeldParts(held: HeldParts, state: HandedBackState, logger: Logger): Promise<void> {
  const failures: unknown[] = [];
  const step = async (what: string, run: () => Promise<void> | void): Promise<void> => {
    try {
      await run();
    } catch (error) {
      logger.error({ err: error }, `stopping: ${what} failed`);
      failures.push(error);
    }
  };
  // Before the socket goes: with --cleanup-config-on-exit the runtime stops calling Warren first.
  const cniConfig = held.cniConfig;
  held.cniConfig = undefined;
  await step('the CNI config manager', () => cniConfig?.stopped());
  const metricsServer = held.metricsServer;
  held.metricsServer = undefined;
  if (metricsServer !== undefined) {
    await step('the metrics server', async () => {
      metricsServer.closeAllConnections();
      await new Promise<void>((resolve) => metricsServer.close(() => resolve()));
    });
  }
  const server = held.server;
  held.server = undefined;
  if (server !== undefined) await step('the API server', () => closeServer(server));
  // Only the socket this agent created, and only if it is still that one: never another agent's.
  held.socket?.remove();
  held.socket = undefined;
  const releases = held.releases;
  held.releases = undefined;
  await step('the release sources', () => releases?.stopped());
  const store = held.store;
  held.store = undefined;
  await step('the store', () => store?.close());
  // A node handed back keeps nothing of Warren's but the mark (node/hand-back.ts); its lock files
  // go while they are still held, so no agent can take a lock on a file about to vanish.
  const handBack = held.handBack;
  held.handBack = undefined;
  const { database, journalDir } = state;
  if (handBack?.reason() !== undefined) {
    await step('removing the handed-back state', () => handBack.removeState({ ...defined({ database }), journalDir }));
  }
  const lock = held.lock;
  held.lock = undefined;
  await step('the instance lock', () => lock?.release());
  if (failures.length > 0) throw failures[0];
}
