/**
 * The release side of the agent in process, as the agent wires it, over a journal directory and a
 * store, on a manual clock: the journal intake feeding the pipeline, and the reconcile pass. Not a
 * test file itself; the release tests share it.
 */
import { join } from 'node:path';
import { pino } from 'pino';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { RecentErrors } from '../../../src/agent/metrics/recent-errors.ts';
import { releaseCore } from '../../../src/agent/release-wiring.ts';
import { ExponentialBackoff } from '../../../src/core/backoff.ts';
import type { ManualClock } from '../../../src/core/clock.ts';
import { MissedDeleteJournal } from '../../../src/sources/missed-delete-journal.ts';
import { NetnsObserver } from '../../../src/sources/netns.ts';
import type { Store } from '../../../src/store/store.ts';
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
}

/** `done` stops every loop and the pipeline. */
export function releaseHarness(clock: ManualClock, store: Store, options: HarnessOptions = {}) {
  const node = options.onlyNode ?? options.node ?? 'n';
  const allocator = new Allocator({ store, clock, node });
  const dir = join(tempDir(), 'journal');
  const journal = new MissedDeleteJournal({ dir, clock, rescanMs: 0 });
  journal.prepare();
  const logger = pino({ level: 'silent' });
  const errors = new RecentErrors(clock, logger);
  const observer = options.observer ?? new NetnsObserver([]);
  const { intake, pipeline, reconciler } = releaseCore(
    {
      node,
      // Judge only this node's allocations, as on a store shared by nodes.
      shared: options.onlyNode !== undefined,
      ownerBackoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 300_000 }),
      containerBackoff: new ExponentialBackoff({ initialMs: 1_000, maxMs: 300_000 }),
      resyncGraceMs: options.resyncGraceMs ?? 0,
      // Longer than any step of a test: only explicit tick() calls run passes, until a test moves the
      // clock past it.
      reconcileIntervalMs: 60_000,
      netnsGraceMs: options.netnsGraceMs ?? 0,
      releaseGoneNetns: options.releaseGoneNetns ?? false,
      containerd: false,
    },
    { store, allocator, clock, logger, errors, observer, journal },
  );
  const abort = new AbortController();
  const consuming = intake.consume(abort.signal, (intent) => pipeline.push(intent));
  reconciler.start(abort.signal);
  return {
    allocator,
    journal,
    dir,
    pipeline,
    reconciler,
    done: async () => {
      abort.abort();
      await consuming;
      pipeline.stop();
    },
  };
}
