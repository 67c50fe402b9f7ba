/**
 * Publication of this node's blocks for the two-tier store (tiered/store.ts): the allocations of
 * each block whose local picture changed are written into the cluster (ClusterTier.publish) in
 * batches, so an ADD costs no request and a burst of ADDs in one block costs one write.
 *
 * Guarantees:
 * - a block marked changed is published at the next run after the mark, with what the node's store
 *   holds at that run (never an older picture: the picture is read when published);
 * - nothing is lost while the cluster is away: a block whose write failed stays marked and the run
 *   ends (the next one retries it, and every block marked since);
 * - runs never overlap: `run` while one is in flight waits for it and runs again, so a `flush`
 *   publishes everything marked before it was called;
 * - a block this node does not hold (given back, vanished) is not published: its mark is dropped;
 * - a loan ledger of this node (an address another node lent it: allocator/lending/) is published as
 *   a loan (`ClusterTier.publishLoan`) while a container holds or may hold it, so the cluster view
 *   shows who really holds a lent address; once given back (its pool carries the given-back mark,
 *   ipam/bookkeeping.ts) its publication is withdrawn. A tier without loans publishes none;
 * - the first run that reaches the cluster publishes every block this node holds, and every loan
 *   pool, so what changed before a restart and was not published then is not lost;
 * - nothing is published before this node's file has been compared with what it published before
 *   (`fileCheck`, tiered/file-check.ts; each run tries it first until it has run through), so a
 *   file that went back never writes its older view over the newer one; marks are kept meanwhile;
 * - a publication carries the block's revision in the node's store (PublishedBlock.revision): the
 *   revision its allocations were read at, or, if the block kept changing under the reads, one read
 *   after them; never one older than what it lists.
 */
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import type { Clock } from '../../core/clock.ts';
import { isBlockKey } from '../../ipam/blocks.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import type { ClusterTier } from './cluster-tier.ts';
import { TieredFileCheck } from './file-check.ts';
import type { Store } from '../store.ts';

export interface TieredPublisherOptions {
  readonly local: Store;
  readonly tier: ClusterTier;
  readonly node: string;
  readonly clock: Clock;
  /** Whether this node holds block `key` now (may ask the cluster, and throw when it is away). */
  readonly holds: (key: string) => Promise<boolean>;
  /** Whether `key` is a loan ledger (one lent address) of its range, not a block. */
  readonly isLoan?: (key: string) => Promise<boolean>;
  /** Keys of every block this node holds (throws when the cluster is away). */
  readonly everyOwnBlock: () => Promise<string[]>;
  /** Told when a run fails (once per outage, not per retry). */
  readonly notice?: ((message: string) => void) | undefined;
}

export class TieredPublisher {
  /** This node's file held against what it published: publishing waits for it. */
  readonly fileCheck: TieredFileCheck;
  readonly #o: TieredPublisherOptions;
  /** Blocks whose local picture changed since they were last published. */
  readonly #dirty = new Set<string>();
  /** The run in flight, if any: runs follow each other. */
  #running: Promise<void> = Promise.resolve();
  /** Whether the last run failed: an outage is told once. */
  #failing = false;
  /** Whether every own block was marked once (the first run after opening). */
  #resynced = false;

  constructor(options: TieredPublisherOptions) {
    this.#o = options;
    const { local, tier, node, notice } = options;
    const publish = (key: string) => this.publishBlock(key);
    this.fileCheck = new TieredFileCheck({ local, tier, node, publish, ...defined({ notice }) });
  }

  mark(key: string): void {
    this.#dirty.add(key);
  }

  /** Blocks waiting to be published. */
  get pending(): number {
    return this.#dirty.size;
  }

  /** Publishes every marked block now (after any run in flight). Never throws: failures stay marked. */
  run(): Promise<void> {
    const next = this.#running.then(() => this.#publishAll());
    this.#running = next;
    return next;
  }

  async #publishAll(): Promise<void> {
    const { local, holds } = this.#o;
    await this.fileCheck.run();
    if (!this.fileCheck.compared) return;
    if (!this.#resynced) {
      try {
        for (const key of await this.#o.everyOwnBlock()) this.#dirty.add(key);
        // And its loans (local pools of no node's affinity), whose last change may not have been published.
        for (const p of await local.ledgers())
          if (isBlockKey(p.ledger) && p.affinity === undefined && (await this.#o.isLoan?.(p.ledger)))
            this.#dirty.add(p.ledger);
        this.#resynced = true;
      } catch (error) {
        this.#failed("this node's blocks could not be read", error); // the next run tries again
        return;
      }
    }
    for (const key of [...this.#dirty]) {
      if (this.fileCheck.withholds(key)) continue; // kept marked: published once accepted
      this.#dirty.delete(key);
      try {
        if (!(await holds(key))) {
          if (await this.#o.isLoan?.(key)) await this.#publishLoan(key);
          continue;
        }
        await this.publishBlock(key);
      } catch (error) {
        // Marked again, with every later block still marked: the next run starts over with them.
        this.#dirty.add(key);
        this.#failed(`block ${key} failed`, error);
        return;
      }
    }
    this.#failing = false;
  }

  /**
   * Publishes block `key` (held by this node) as the node's store holds it now, whether publishing
   * may start or not (the file check publishes what it merged this way); throws when it cannot.
   */
  async publishBlock(key: string): Promise<void> {
    const { local, tier, node, clock } = this.#o;
    const { allocations, revision } = await this.#picture(key);
    const [summary] = (await local.ledgers(key)).filter((p) => p.ledger === key);
    await tier.publish({
      key,
      node,
      counts: { allocated: summary?.allocated ?? allocations.length, resting: summary?.resting ?? 0 },
      allocations,
      publishedAt: clock.now(),
      ...defined({ revision }),
    });
  }

  /**
   * The block's allocations and the revision they were read at: the list and a snapshot (which
   * has the revision) are two reads, so they are taken again while they disagree; after a few
   * rounds the revision read last stands (newer than the list, never older).
   */
  async #picture(key: string): Promise<{ allocations: Allocation[]; revision: number | undefined }> {
    for (let round = 1; ; round++) {
      const allocations = await this.#o.local.list({ ledger: key });
      const read = await this.#o.local.readLedger(key);
      if (read.kind !== 'snapshot') return { allocations, revision: read.revision };
      const listed = new Set(allocations.map((a) => a.address));
      const same = read.allocations.length === listed.size && read.allocations.every((a) => listed.has(a));
      if (same || round === 3) return { allocations, revision: read.revision };
    }
  }

  /** Publishes loan ledger `key` as it is now, or withdraws it once given back (see the header). */
  async #publishLoan(key: string): Promise<void> {
    const { local, tier, node, clock } = this.#o;
    if (tier.publishLoan === undefined || tier.withdrawLoan === undefined) return;
    const allocations = await local.list({ ledger: key });
    if (allocations.some((a) => isBookkeeping(a))) return tier.withdrawLoan(key, node);
    const resting = (await local.ledgers(key)).find((p) => p.ledger === key)?.resting ?? 0;
    await tier.publishLoan({
      key,
      node,
      counts: { allocated: allocations.length, resting },
      allocations,
      publishedAt: clock.now(),
      loan: true,
    });
  }

  /** Tells the first failure of an outage. */
  #failed(what: string, error: unknown): void {
    if (!this.#failing) this.#o.notice?.(`publishing: ${what}, retrying: ${messageOf(error)}`);
    this.#failing = true;
  }
}
