/**
 * The release side of the agent in process, wired by the agent's own ReleaseWiring from options
 * resolved as the agent resolves its flags, over a journal directory and a store, on a manual
 * clock: the journal intake feeding the pipeline, and the reconcile pass. The sources that need a
 * runtime (containerd, Kubernetes, plugins) are off. What a test replaces it replaces through the
 * wiring's overrides: a journal that rescans only when told, its own namespace observer, and the
 * reconcile pass's netns sweep and node filter. Not a test file itself; the release tests share it.
 */
import { join } from 'node:path';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { RecentErrors } from '../../../src/agent/metrics/recent-errors.ts';
import { NO_TELEMETRY } from '../../../src/agent/metrics/telemetry.ts';
import { ReleaseWiring } from '../../../src/agent/release-wiring.ts';
import { type AgentOptions, resolveAgentOptions } from '../../../src/agent/settings/options.ts';
import type { ManualClock } from '../../../src/core/clock.ts';
import { MissedDeleteJournal } from '../../../src/sources/missed-delete-journal.ts';
import { NetnsObserver } from '../../../src/sources/netns.ts';
import type { Store } from '../../../src/store/store.ts';
import { silentLogger } from '../../helpers/logger.ts';
import { tempDir } from '../../helpers/processes.ts';

export interface HarnessOptions {
  readonly node?: string;
  readonly observer?: NetnsObserver;
  readonly resyncGraceMs?: number;
  readonly netnsGraceMs?: number;
  /** Sweep namespaces on every pass. */
  readonly releaseGoneNetns?: boolean;
  /** Judge only this node's allocations (a store shared by nodes). */
  readonly onlyNode?: string;
  /** More of the agent's flags, as its command line would give them (the API harness: its socket and state). */
  readonly flags?: Partial<Record<keyof AgentOptions, string>>;
}

/** `done` stops every loop and the pipeline. */
export async function releaseHarness(clock: ManualClock, store: Store, options: HarnessOptions = {}) {
  const node = options.node ?? 'n';
  const allocator = new Allocator({ store, clock, node });
  const stateDir = options.flags?.stateDir ?? tempDir();
  const dir = join(stateDir, 'journal');
  const agentOptions = resolveAgentOptions(
    {
      stateDir,
      journalDir: dir,
      nodeName: node,
      // No directory of the host's (doctor's view); the observer and the sweep are the test's, below.
      netnsDirs: '',
      containerdGraceSeconds: String((options.resyncGraceMs ?? 0) / 1000),
      netnsGraceSeconds: String((options.netnsGraceMs ?? 0) / 1000),
      // Longer than any step of a test: only explicit tick() calls run passes, until a test moves
      // the clock past it.
      reconcileIntervalSeconds: '60',
      metricsAddress: '',
      ...options.flags,
    },
    {},
    0,
    stateDir,
  );
  const journal = new MissedDeleteJournal({ dir, clock, rescanMs: 0 });
  const errors = new RecentErrors(clock, silentLogger);
  const wiring = await ReleaseWiring.open(agentOptions, {
    store,
    allocator,
    clock,
    logger: silentLogger,
    errors,
    telemetry: NO_TELEMETRY,
    over: {
      journal,
      observer: options.observer ?? new NetnsObserver([]),
      reconciler: {
        releaseGoneNetns: options.releaseGoneNetns ?? false,
        ...(options.onlyNode === undefined ? {} : { onlyNode: options.onlyNode }),
      },
    },
  });
  const abort = new AbortController();
  wiring.start(abort.signal);
  return {
    /** The options the wiring was built from, as the agent would have resolved them. */
    options: agentOptions,
    allocator,
    journal,
    dir,
    pipeline: wiring.pipeline,
    reconciler: wiring.reconciler,
    done: async () => {
      abort.abort();
      await wiring.stopped();
    },
  };
}
