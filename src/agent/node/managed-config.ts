/**
 * The CNI config manager as the agent's options configure it (--manage-cni-config): the conf dir
 * and the primary, how long to wait for one, the readiness indicator, whether to clean up on exit.
 * The socket and the journal are written into Warren's config only where they are not the
 * plugin's defaults: the plugin finds those by itself. And the host-local takeover beside it, made
 * when the manager may take a primary over or the node was handed back.
 */
import type { Logger } from 'pino';
import { DEFAULT_SOCKET } from '../../api/socket.ts';
import { DEFAULT_JOURNAL_DIR } from '../../cni/journal-dir.ts';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import type { Store } from '../../store/store.ts';
import type { AgentOptions } from '../settings/options.ts';
import { CniConfigManager } from './cni-config-manager.ts';
import type { NodeHandBack } from './hand-back.ts';
import { HostLocalTakeover, type HostLocalTakeoverOptions } from './host-local-takeover.ts';

export interface ManagedConfigDeps {
  /** Where cleanup on exit asks whether Warren still holds an address of the network on this node. */
  readonly store: Pick<Store, 'list'>;
  /** Told of a host-local primary before Warren's file is written from it. */
  readonly takeover: HostLocalTakeover | undefined;
  /** Why the node was handed back before this start (`warren uninstall`); undefined when it was not. */
  readonly handedBack: string | undefined;
  readonly clock: Clock;
  readonly logger: Logger;
}

export function managedCniConfig(o: AgentOptions, deps: ManagedConfigDeps): CniConfigManager {
  const { store, takeover, handedBack } = deps;
  const socket = unlessDefault(o.socket, DEFAULT_SOCKET);
  const journalDir = unlessDefault(o.journalDir, DEFAULT_JOURNAL_DIR);
  return new CniConfigManager({
    confDir: o.cniConfDir,
    ...defined({ primaryConfig: o.primaryConfig }),
    primaryWaitMs: o.primaryWaitSeconds * 1000,
    ...defined({ readinessIndicator: o.readinessIndicatorFile }),
    cniVersionMax: o.cniVersionMax,
    cleanupOnExit: o.cleanupConfigOnExit,
    holdsAddresses: async (network) => (await store.list({ network, node: o.nodeName })).length > 0,
    ...defined({ takeover, handedBack, socket, journalDir }),
    clock: deps.clock,
    logger: deps.logger,
  });
}

/**
 * The host-local takeover, started on `signal`: when the config manager may take a primary over,
 * or when the node was handed back (releases keep cleaning the reservations written then).
 */
export function managedTakeover(
  o: Pick<AgentOptions, 'manageCniConfig' | 'nodeName'>,
  handBack: NodeHandBack,
  deps: Omit<HostLocalTakeoverOptions, 'node' | 'rescanMs'>,
  signal: AbortSignal,
): HostLocalTakeover | undefined {
  const handedBack = handBack.reason();
  if (!o.manageCniConfig && handedBack === undefined) return undefined;
  const takeover = new HostLocalTakeover({ ...deps, node: o.nodeName });
  if (handedBack !== undefined) takeover.restoreHandedBack(handedBack, handBack.targets());
  takeover.start(signal);
  return takeover;
}

/** Plugin defaults need not be written into the config: the plugin finds them by itself. */
function unlessDefault(value: string, plugin: string): string | undefined {
  return value === plugin ? undefined : value;
}
