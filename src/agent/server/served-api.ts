/**
 * What the agent's socket serves, connected as the agent runs it: the operator service and the CNI
 * service over one store and allocator, the HTTP server routing to both, and `warren doctor`
 * answered from the options. The CNI service is ready when the operator service says so; an ADD
 * first settles what the release pipeline holds for its attachment; GC spares what a runtime
 * adapter answers for; the store kind a network config must name is the store's (a store shared
 * by nodes is etcd). The agent's other parts (cluster upkeep, CNI config, plugins, metrics, ...)
 * are the operator service's options, each absent where it is off.
 *
 * Nothing listens here: the caller chooses where and when (the agent after its socket checks and
 * warm-up; the API tests on a temp socket).
 */
import type { Server } from 'node:http';
import type { Allocator } from '../../allocator/allocator.ts';
import type { Clock } from '../../core/clock.ts';
import { NetnsObserver } from '../../sources/netns.ts';
import type { Store } from '../../store/store.ts';
import type { ReleasePipeline } from '../release/pipeline.ts';
import type { AgentOptions } from '../settings/options.ts';
import { createApiServer } from './api-server.ts';
import { CniService, type CniServiceOptions } from './cni-service.ts';
import { doctorFacts } from './doctor-facts.ts';
import { AgentService, type AgentServiceOptions } from './operator-service.ts';

/**
 * The operator service's own options (its optional parts, each absent where it is off), but its
 * socket and `warren doctor`, which come from the options; with what the CNI service needs beside.
 */
export interface ServedApiDeps extends Omit<AgentServiceOptions, 'socket' | 'doctor'> {
  /** An ADD settles what is pending for its attachment first; GC spares what an adapter answers for. */
  readonly pipeline: Pick<ReleasePipeline, 'applyPending' | 'adapterOf'>;
  /** Why an ADD must wait now (readiness indicator, host-local import, hand-back); none: never. */
  readonly addGate?: CniServiceOptions['addGate'];
  readonly onIgnoredKeys?: CniServiceOptions['onIgnoredKeys'];
  /** Told of a CNI call that failed unexpectedly (not a refusal). */
  readonly onCniFailure: (error: unknown, command: string) => void;
  /** Told of a request that failed unexpectedly (not a refusal). */
  readonly onRequestError: (error: unknown, route: string) => void;
}

export interface ServedApi {
  readonly service: AgentService;
  readonly cni: CniService;
  readonly server: Server;
}

export function servedApi(o: AgentOptions, d: ServedApiDeps): ServedApi {
  const { pipeline, addGate, onIgnoredKeys, onCniFailure, onRequestError, ...parts } = d;
  const { store, allocator, clock, version, containerd, cniConfig, metrics, cluster, telemetry } = parts;
  const service = new AgentService({
    ...parts,
    socket: o.socket,
    doctor: () =>
      doctorFacts({
        options: o,
        store,
        observer: new NetnsObserver(o.netnsDirs),
        clock,
        version,
        ...(containerd === undefined ? {} : { containerd }),
        ...(cniConfig === undefined ? {} : { cniConfig }),
        ...(metrics === undefined ? {} : { metrics }),
        ...(cluster === undefined ? {} : { clusterProblem: () => cluster.problem() }),
      }),
  });
  const cni = new CniService({
    allocator,
    readiness: () => service.readiness(),
    ...(addGate === undefined ? {} : { addGate }),
    storeKind: store.membership !== undefined ? 'etcd' : 'sqlite',
    clock,
    gcGraceMs: o.gcGraceSeconds * 1000,
    beforeAdd: (owner, podUID) => pipeline.applyPending(owner, podUID),
    runtimeOf: (a) => pipeline.adapterOf(a),
    ...(onIgnoredKeys === undefined ? {} : { onIgnoredKeys }),
    onFailure: onCniFailure,
    ...(telemetry === undefined ? {} : { telemetry }),
  });
  const server = createApiServer({ cni, service, onError: onRequestError });
  return { service, cni, server };
}
