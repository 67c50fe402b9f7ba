/**
 * The release side's core, composed: the pipeline with the parts it is composed with (its own
 * exited containers, netns scopes and counts, and the applier), the journal intake feeding it and
 * the reconcile pass, from the settings the options make. Functions a test calls with its own
 * settings and parts (a manual clock, a store that fails on demand), as the agent's release wiring
 * (release-wiring.ts) calls them with its own: `releasePipeline` makes the pipeline, `releaseCore`
 * adds the journal intake and the reconcile pass, `releaseSettings` is what the options make of
 * their settings. Nothing here starts anything.
 */
import type { Logger } from 'pino';
import type { Allocator } from '../../allocator/allocator.ts';
import { type BackoffPolicy, ExponentialBackoff } from '../../core/backoff.ts';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import type { Allocation, Owner } from '../../ipam/allocation.ts';
import type { MissedDeleteJournal } from '../../sources/missed-delete-journal.ts';
import type { NetnsObserver } from '../../sources/netns.ts';
import type { Store } from '../../store/store.ts';
import type { RecentErrors } from '../metrics/recent-errors.ts';
import type { Telemetry } from '../metrics/telemetry.ts';
import type { AgentOptions } from '../settings/options.ts';
import { ReleaseApplier } from './applier.ts';
import { ReleaseCounts } from './counts.ts';
import { ExitedContainers } from './exited-containers.ts';
import type { ReleaseIntent } from './intent.ts';
import { JournalIntake } from './journal.ts';
import { CONTAINERD_CRI_NETNS_PREFIXES, NetnsScopes } from './netns-scopes.ts';
import { ReleasePipeline } from './pipeline.ts';
import { ReleaseReconciler } from './reconciler.ts';
import type { SandboxLookup } from './sandbox-netns.ts';

/** The release side's settings, in the units its parts take. */
export interface ReleaseSettings {
  /** This node: only what its agent allocated is judged by runtime and pod intents. */
  readonly node: string;
  /**
   * The store is shared by nodes (the options say so): the reconcile pass judges only this node's
   * allocations, and another node's are ordered by the wall clock alone.
   */
  readonly shared: boolean;
  readonly ownerBackoff: BackoffPolicy;
  readonly containerBackoff: BackoffPolicy;
  readonly resyncGraceMs: number;
  readonly reconcileIntervalMs: number;
  readonly netnsGraceMs: number;
  /** The reconcile pass sweeps allocations whose namespace is provably gone. */
  readonly releaseGoneNetns: boolean;
  /** containerd's source is on: the namespaces its CRI makes are its own, never an adapter's. */
  readonly containerd: boolean;
}

/** The settings the options make: owner keys back off from 1 s to 5 min, container keys as told. */
export function releaseSettings(o: AgentOptions, shared: boolean): ReleaseSettings {
  return {
    node: o.nodeName,
    shared,
    ownerBackoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 300_000 }),
    containerBackoff: new ExponentialBackoff({
      initialMs: o.eventRetrySeconds * 1000,
      maxMs: o.eventRetryMaxSeconds * 1000,
    }),
    resyncGraceMs: o.containerdGraceSeconds * 1000,
    reconcileIntervalMs: o.reconcileIntervalSeconds * 1000,
    netnsGraceMs: o.netnsGraceSeconds * 1000,
    releaseGoneNetns: o.netnsDirs.length > 0 && o.netnsSweep,
    containerd: o.containerd,
  };
}

/** What the pipeline is composed over. */
export interface ReleasePipelineDeps {
  readonly store: Store;
  readonly allocator: Allocator;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly observer: NetnsObserver;
  readonly telemetry?: Telemetry;
  /** Intents recorded durably for an owner that may not have arrived yet (the journal, read now). */
  readonly recordedFor?: (owner: Owner) => readonly ReleaseIntent[];
  /** Told of every release committed (Kubernetes reports them as Events on the pod). */
  readonly onReleased?: (intent: ReleaseIntent, released: readonly Allocation[], why: string) => void;
}

/** The pipeline and the parts composed with it. */
export interface ReleasePipelineParts {
  readonly pipeline: ReleasePipeline;
  readonly exited: ExitedContainers;
  /** What runtime adapters answer for; shared with the registry's handler and the CNI service. */
  readonly scopes: NetnsScopes;
  readonly counts: ReleaseCounts;
}

/** The release pipeline, with its own exited containers, netns scopes and counts. */
export function releasePipeline(settings: ReleaseSettings, deps: ReleasePipelineDeps): ReleasePipelineParts {
  const { store, clock, logger, telemetry } = deps;
  const exited = new ExitedContainers(clock);
  const containerd = { owner: 'containerd', prefixes: CONTAINERD_CRI_NETNS_PREFIXES };
  const scopes = new NetnsScopes(settings.containerd ? [containerd] : []);
  const counts = new ReleaseCounts();
  const { node, shared } = settings;
  const applier = new ReleaseApplier({
    allocator: deps.allocator,
    store,
    observer: deps.observer,
    clock,
    logger,
    node,
    shared,
    exited,
    ...defined({ onReleased: deps.onReleased, telemetry }),
  });
  const pipeline = new ReleasePipeline({
    clock,
    logger,
    applier,
    ownerBackoff: settings.ownerBackoff,
    containerBackoff: settings.containerBackoff,
    store,
    node,
    resyncGraceMs: settings.resyncGraceMs,
    exited,
    scopes,
    counts,
    ...defined({ recordedFor: deps.recordedFor, telemetry }),
  });
  return { pipeline, exited, scopes, counts };
}

/** What the release core is composed over: the pipeline's, and the journal it reads. */
export interface ReleaseCoreDeps extends Omit<ReleasePipelineDeps, 'recordedFor'> {
  readonly errors: RecentErrors;
  /** The missed-delete journal, prepared. */
  readonly journal: MissedDeleteJournal;
  /** The runtime's sandboxes of a pod (containerd's, when followed): the reconcile pass records their namespaces. */
  readonly sandboxes?: SandboxLookup;
}

/** The pipeline and its parts, the journal intake feeding it, and the reconcile pass. */
export interface ReleaseCore extends ReleasePipelineParts {
  readonly intake: JournalIntake;
  readonly reconciler: ReleaseReconciler;
}

/** The release side without its optional sources: the journal intake, the pipeline, the reconcile pass. */
export function releaseCore(settings: ReleaseSettings, deps: ReleaseCoreDeps): ReleaseCore {
  const { store, clock, logger, errors, telemetry, observer } = deps;
  const intake = new JournalIntake({ journal: deps.journal, logger, errors });
  const parts = releasePipeline(settings, { ...deps, recordedFor: (owner) => intake.readNow(owner) });
  const reconciler = new ReleaseReconciler({
    pipeline: parts.pipeline,
    journal: intake,
    store,
    observer,
    clock,
    logger,
    errors,
    intervalMs: settings.reconcileIntervalMs,
    netnsGraceMs: settings.netnsGraceMs,
    releaseGoneNetns: settings.releaseGoneNetns,
    ...(settings.shared ? { onlyNode: settings.node } : {}),
    ...defined({ telemetry, sandboxes: deps.sandboxes }),
  });
  return { ...parts, intake, reconciler };
}
