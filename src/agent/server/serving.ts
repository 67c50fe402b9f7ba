/**
 * The agent's serving side, composed: the operator service, the CNI service in front of the same
 * allocator (ready when the operator service says so), `warren doctor`'s facts read from the same
 * parts, and the API server routing to both. A function of the parts it serves from, so a test
 * builds the serving side as the agent does, with parts of its own in their place (a store that
 * fails on demand, a manual clock) and `onError`/`onFailure` kept instead of logged.
 */
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { defined } from '../../core/defined.ts';
import type { StoreKind } from '../../store/store.ts';
import { WHEREABOUTS_STORE_KEYS } from '../../cni/node-local.ts';
import { NetnsObserver } from '../../sources/netns.ts';
import type { AgentOptions } from '../settings/options.ts';
import { createApiServer } from './api-server.ts';
import { CniService, type CniServiceOptions } from './cni-service.ts';
import { doctorFacts } from './doctor-facts.ts';
import { AgentService, type AgentServiceOptions } from './operator-service.ts';

export interface ServingDeps extends Omit<AgentServiceOptions, 'socket' | 'doctor'> {
  /** The socket, the GC grace and what doctor reports of the agent's setup. */
  readonly options: AgentOptions;
  /** The store the options name (settings/store-kind.ts): a network asking for another is refused. */
  readonly storeKind: StoreKind;
  /** Applies what is pending for an attachment before its ADD (the release pipeline). */
  readonly beforeAdd?: CniServiceOptions['beforeAdd'] | undefined;
  /** Which runtime adapter answers for an allocation (release/netns-scopes.ts). */
  readonly runtimeOf?: CniServiceOptions['runtimeOf'] | undefined;
  /** Plan each ADD before it allocates, in order (add-plan.ts: pools, addresses, holdings). */
  readonly planners?: CniServiceOptions['planners'] | undefined;
  /** Told of each ADD that allocated (an IPAMClaim's status is written from it). */
  readonly afterAdd?: CniServiceOptions['afterAdd'] | undefined;
  /** Why ADD of a network must wait now (the readiness indicator, a takeover, a hand-back). */
  readonly addGate?: CniServiceOptions['addGate'] | undefined;
  /**
   * Present when only node-local configs may be served (a per-node store while the Kubernetes
   * source is on): the config derived from the node's own CIDR, if any. Doctor reports it too.
   */
  readonly nodeLocalOnly?: CniServiceOptions['nodeLocalOnly'] | undefined;
  readonly logger: Logger;
  /** Told of every request that failed unexpectedly; default: logged. */
  readonly onError?: ((error: unknown, route: string) => void) | undefined;
  /** Told of every CNI call that failed unexpectedly; default: logged. */
  readonly onFailure?: CniServiceOptions['onFailure'] | undefined;
}

export interface Serving {
  readonly service: AgentService;
  readonly cni: CniService;
  /** Not listening yet: server/socket.ts listens on the agent's socket. */
  readonly server: Server;
}

/** Whether an ignored-key line (`<path> (<reason>)`) names one of whereabouts' store keys. */
function isStoreKeyLine(line: string): boolean {
  const path = line.split(' ')[0] ?? '';
  return WHEREABOUTS_STORE_KEYS.has(path.slice(path.lastIndexOf('.') + 1));
}

export function servingParts(deps: ServingDeps): Serving {
  const {
    options: o,
    storeKind,
    beforeAdd,
    runtimeOf,
    addGate,
    planners,
    afterAdd,
    nodeLocalOnly,
    logger,
    onError,
    onFailure,
    ...parts
  } = deps;
  const { store, clock, version, containerd, cniConfig, metrics, cluster } = parts;
  const doctor = () =>
    doctorFacts({
      options: o,
      store,
      observer: new NetnsObserver(o.netnsDirs),
      clock,
      version,
      ...defined({ containerd, cniConfig, metrics }),
      ...(cluster === undefined ? {} : { clusterProblem: cluster.problem }),
      ...defined({ nodeLocalOnly }),
      ...(parts.reservations === undefined ? {} : { reservations: () => service.reservations() }),
      ...(parts.kubeApi === undefined ? {} : { kubeApi: parts.kubeApi }),
      ...(parts.etcdApi === undefined ? {} : { etcdApi: parts.etcdApi }),
      warrenPools: () => {
        const pools = parts.kubernetes?.().planning?.pools;
        return pools === undefined ? undefined : { listed: pools.listed, names: pools.list.map((p) => p.name) };
      },
    });
  const service = new AgentService({ ...parts, socket: o.socket, doctor });
  const cni = new CniService({
    allocator: parts.allocator,
    readiness: () => service.readiness(),
    ...defined({ addGate }),
    storeKind,
    ...defined({ nodeLocalOnly }),
    clock,
    gcGraceMs: o.gcGraceSeconds * 1000,
    ...defined({ beforeAdd, runtimeOf, planners, afterAdd }),
    onIgnoredKeys: (network, keys) => {
      // Whereabouts' store keys are not ignored: the store serves them, or the config is for this node alone.
      const store = keys.filter(isStoreKeyLine);
      const other = keys.filter((key) => !isStoreKeyLine(key));
      if (other.length > 0)
        logger.warn(
          { network, keys: other },
          `network ${network}: ignoring whereabouts keys that configure whereabouts itself ` +
            "(Warren keeps addresses in its agent's store)",
        );
      if (store.length > 0 && storeKind === 'sqlite')
        logger.warn(
          { network, keys: store },
          `network ${network} was written for ranges the nodes share (whereabouts' store keys), and this agent ` +
            'keeps addresses on this node alone (--store sqlite): if another node serves it too, run the agents ' +
            'on a shared store (README, Stores)',
        );
      else if (store.length > 0)
        logger.info(
          { network, keys: store },
          `network ${network}: whereabouts' store keys served by the ${storeKind} store`,
        );
    },
    onFailure: onFailure ?? ((error, command) => logger.error({ err: error, command }, 'CNI call failed')),
    ...defined({ telemetry: parts.telemetry }),
  });
  const server = createApiServer({
    cni,
    service,
    onError: onError ?? ((error, route) => logger.error({ err: error, route }, 'request failed')),
  });
  return { service, cni, server };
}
