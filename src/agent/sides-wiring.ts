/**
 * The agent's sides, built side by side on its base (agent.ts's start, step 3): the release side
 * (release-wiring.ts) and, when --kubernetes is on, the Kubernetes side on its pipeline and fed into
 * it (kubernetes-wiring.ts, loaded only then: an agent without it loads none of its code); the
 * node's host-local takeover and CNI config manager; and the serving side over all of them
 * (serving-wiring.ts), not listening yet. No side builds another: each is built here from the base
 * and what is built before it. The takeover runs from here on; everything else
 * is started by the agent's next step. Each part stop() must undo is handed to `hold` the moment it
 * exists (held-parts.ts), so a start that fails after it still stops it.
 */
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { MetricsEndpointStatus } from '../api/status.ts';
import type { Clock } from '../core/clock.ts';
import type { Base } from './base-wiring.ts';
import type { HeldParts } from './held-parts.ts';
import type { KubernetesParts } from './kubernetes-parts.ts';
import type { CniConfigManager } from './node/cni-config-manager.ts';
import type { HostLocalTakeover } from './node/host-local-takeover.ts';
import { managedCniConfig, managedTakeover } from './node/managed-config.ts';
import { ReleaseWiring } from './release-wiring.ts';
import type { AgentService } from './server/operator-service.ts';
import { servingSide } from './serving-wiring.ts';
import type { AgentOptions } from './settings/options.ts';

/** What step 3 builds on the base: the sides, side by side. */
export interface Built extends Base {
  readonly releases: ReleaseWiring;
  readonly kubernetes: KubernetesParts | undefined;
  readonly takeover: HostLocalTakeover | undefined;
  readonly cniConfig: CniConfigManager | undefined;
  readonly service: AgentService;
  readonly server: Server;
}

export interface SidesWiringDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  /** Stops the takeover (and, once started, everything else). */
  readonly signal: AbortSignal;
  /** A part the agent cannot serve without failed after start (Agent.failed). */
  readonly onFailure: (error: Error) => void;
  /** Where metrics are served, once they are (before the socket listens); undefined when off. */
  readonly metricsStatus: (() => MetricsEndpointStatus) | undefined;
  /** Where each part stop() must undo is put as soon as it exists (held-parts.ts). */
  readonly hold: Pick<HeldParts, 'releases' | 'cniConfig' | 'server'>;
}

export async function buildSides(o: AgentOptions, base: Base, deps: SidesWiringDeps): Promise<Built> {
  const { store, membership, allocator, reserved, telemetry, handBack } = base;
  const { clock, logger, onFailure, hold } = deps;
  // The Kubernetes side's code is loaded only when it is on.
  const [releases, kubernetesWiring] = await Promise.all([
    ReleaseWiring.open(o, { store, membership, allocator, clock, logger, errors: base.errors, telemetry, onFailure }),
    o.kubernetes ? import('./kubernetes-wiring.ts') : undefined,
  ]);
  const accounting = { requests: base.kubeRequests, userAgent: base.userAgent };
  const kubernetesDeps = { store, membership, allocator, clock, logger, telemetry, reserved, accounting };
  const kubernetes = kubernetesWiring?.kubernetesParts(o, kubernetesDeps, releases.pipeline);
  if (kubernetes !== undefined) releases.feedFrom(kubernetes);
  hold.releases = releases;
  const takeover = managedTakeover(o, handBack, { allocator, store, clock, logger }, deps.signal);
  const configDeps = { store, takeover, handedBack: handBack.reason(), clock, logger };
  const cniConfig = o.manageCniConfig ? managedCniConfig(o, configDeps) : undefined;
  hold.cniConfig = cniConfig;
  const sides = { releases, kubernetes, takeover, cniConfig };
  const serving = { ...base, ...sides, options: o, clock, logger, metricsStatus: deps.metricsStatus };
  const { service, server } = servingSide(serving);
  hold.server = server;
  return { ...base, ...sides, service, server };
}
