/**
 * The release side of the agent in process, composed by the agent's own functions
 * (release/core.ts `releaseSettings` and `releaseCore`) from options resolved as the agent
 * resolves its flags, over a journal directory and a store, on a manual clock: the journal intake
 * feeding the pipeline, and the reconcile pass. The sources that need a runtime (containerd,
 * Kubernetes, plugins) are not composed. What a test replaces it replaces as an override of the
 * agent's settings or parts: a journal that rescans only when told, its own namespace observer, the
 * reconcile pass's netns sweep and node filter. Not a test file itself; the release tests share it.
 */
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { RecentErrors } from '../../../src/agent/metrics/recent-errors.ts';
import { NO_TELEMETRY, type Telemetry } from '../../../src/agent/metrics/telemetry.ts';
import { releaseCore, releaseSettings } from '../../../src/agent/release/core.ts';
import type { SandboxLookup } from '../../../src/agent/release/sandbox-netns.ts';
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
  /** Judge only this node's allocations (a store shared by nodes); the harness's node when set. */
  readonly onlyNode?: string;
  /** The runtime's sandboxes of a pod, as containerd would answer (release/sandbox-netns.ts). */
  readonly sandboxes?: SandboxLookup;
  /** More of the agent's flags, as its command line would give them (the API harness: its socket and state). */
  readonly flags?: Partial<Record<keyof AgentOptions, string>>;
  /** Told what every audit found (a pass sweeping namespaces audits once). */
  readonly telemetry?: Telemetry;
}

/** `done` stops every loop and the pipeline. */
export async function releaseHarness(clock: ManualClock, store: Store, options: HarnessOptions = {}) {
  const node = options.onlyNode ?? options.node ?? 'n';
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
      containerd: 'off',
      containerdGraceSeconds: String((options.resyncGraceMs ?? 0) / 1000),
      netnsGraceSeconds: String((options.netnsGraceMs ?? 0) / 1000),
      // Longer than any step of a test: only the pass at start and explicit tick() calls run
      // passes, until a test moves the clock past it.
      reconcileIntervalSeconds: '60',
      metricsAddress: '',
      ...options.flags,
    },
    {},
    0,
    stateDir,
  );
  const journal = new MissedDeleteJournal({ dir, clock, rescanMs: 0 });
  journal.prepare();
  const errors = new RecentErrors(clock, silentLogger);
  const settings = {
    // Judge only this node's allocations, as on a store shared by nodes.
    ...releaseSettings(agentOptions, options.onlyNode !== undefined),
    releaseGoneNetns: options.releaseGoneNetns ?? false,
  };
  const observer = options.observer ?? new NetnsObserver([]);
  const { intake, pipeline, reconciler, scopes } = releaseCore(settings, {
    store,
    allocator,
    clock,
    logger: silentLogger,
    errors,
    observer,
    journal,
    telemetry: options.telemetry ?? NO_TELEMETRY,
    ...(options.sandboxes === undefined ? {} : { sandboxes: options.sandboxes }),
  });
  const abort = new AbortController();
  const consuming = intake.consume(abort.signal, (intent) => pipeline.push(intent));
  reconciler.start(abort.signal);
  return {
    /** The options the parts were composed from, as the agent would have resolved them. */
    options: agentOptions,
    allocator,
    journal,
    dir,
    pipeline,
    reconciler,
    scopes,
    done: async () => {
      abort.abort();
      await consuming;
      pipeline.stop();
    },
  };
}

/** A netns directory the observer can see (a mount point in a fake mountinfo), under a temp dir. */
export function watchedNetns(prefix: string): { readonly seen: string; readonly observer: NetnsObserver } {
  const root = realpathSync(tempDir(prefix));
  const seen = join(root, 'netns');
  mkdirSync(seen);
  const mountinfo = join(root, 'mountinfo');
  writeFileSync(mountinfo, `22 1 8:1 / / rw - ext4 /dev/sda1 rw\n100 22 0:50 / ${seen} rw - tmpfs tmpfs rw\n`);
  return { seen, observer: new NetnsObserver([seen], mountinfo) };
}
