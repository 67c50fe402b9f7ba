/**
 * Publication of this node's blocks for the two-tier store (tiered/store.ts): the allocations of
 * each block whose local picture changed are written into the cluster (ClusterTier.publish) in
 * batches, so an ADD costs no request and a burst of ADDs in one block costs one write; and a
 * publication announces the addresses the node hands out next (`ahead`), so that ADDs spread over
 * time cost no write each (issue 36: ~0.9 writes per ADD or DEL before, one per changed block per run).
 *
 * Guarantees:
 * - what the cluster holds of a block covers every address this node handed out in it, except for
 *   the time between taking one not covered and the next run (as before for every ADD): which
 *   changes leave a block covered is tiered/publication-need.ts;
 * - a block marked changed whose change leaves it uncovered (or its `ahead` running low) is
 *   published at the next run after the mark, with what the node's store holds at that run (never
 *   an older picture: the picture is read when published); one whose change leaves it covered (an
 *   `ahead` address taken, an address released) stays marked and is published at the first run
 *   `settleMs` after its last write, or with the next write it needs anyway. So the cluster's
 *   figures and listings lag by up to the settle interval, and over-cover meanwhile: a released
 *   address stays listed (a file gone back keeps it as its container's record until the container
 *   is proven gone, as any other: a leak bounded by that proof, in recovery only);
 * - `run({ all: true })` (`flush`, close) publishes every marked block, covered or not;
 * - nothing is lost while the cluster is away: a block whose write failed stays marked and the run
 *   ends (the next one retries it, and every block marked since);
 * - runs never overlap: `run` while one is in flight waits for it and runs again, so a `flush`
 *   publishes everything marked before it was called;
 * - a block this node does not hold (given back, vanished) is not published: its mark is dropped;
 * - a publication of a held block that vanished from the cluster (deleted by hand: `vanished`, told
 *   by the tier's watch of this node's publications) is written again at the next run, as a block
 *   never written since start, whatever its changes since: it is what keeps another node off the
 *   block should its claim vanish too, and what a node whose disk went back takes back;
 * - a loan ledger of this node (an address another node lent it: allocator/lending/) is published as
 *   a loan (`ClusterTier.publishLoan`) while a container holds or may hold it, so the cluster view
 *   shows who really holds a lent address; once given back (its pool carries the given-back mark,
 *   ipam/bookkeeping.ts) its publication is withdrawn. A tier without loans publishes none;
 * - the first run that reaches the cluster publishes every block this node holds, and every loan
 *   pool, so what changed before a restart and was not published then is not lost; so does the first
 *   after the operator accepts a store that lost its data (`accepted`): what this publisher wrote to
 *   the old store may be gone, or older, in the one accepted, and a publication deleted while the
 *   node was halted was dropped with the block not held then (found by the soak, etcd seed 3943 step
 *   704: a publication deleted by hand during a recovery never written again);
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
import { type WrittenBlock, aheadOf, ownerOf, publicationNeed } from './publication-need.ts';
import type { Store } from '../store.ts';
import { noSuccession } from '../succession.ts';
import { failpoint } from '../../core/failpoints.ts';

/** Addresses a publication announces by default (capped by what the block has free). */
export const DEFAULT_AHEAD = 16;
/** Default most time a covered change waits for its write, ms. */
export const DEFAULT_SETTLE_MS = 600_000;

/** A block as read for publishing: its allocations, the revision read, and what it would announce. */
interface Picture {
  readonly allocations: Allocation[];
  readonly revision: number | undefined;
  readonly ahead: string[];
}

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
  /** Addresses a publication announces as handed out next (default DEFAULT_AHEAD; 0: none). */
  readonly ahead?: number | undefined;
  /** Most time a change that leaves its block covered waits for its write, ms (default DEFAULT_SETTLE_MS). */
  readonly settleMs?: number | undefined;
  /** Told each time a publication of block `key` was written. */
  readonly written?: ((key: string) => void) | undefined;
}

export class TieredPublisher {
  /** This node's file held against what it published: publishing waits for it. */
  readonly fileCheck: TieredFileCheck;
  readonly #o: TieredPublisherOptions;
  /** Blocks whose local picture changed since they were last published. */
  readonly #dirty = new Set<string>();
  /** What was last written of each block since start: what decides whether a change needs a write. */
  readonly #written = new Map<string, WrittenBlock>();
  /**
   * Marked blocks whose changes were all covered, and when (monotonic) they settle: not read again
   * before then unless marked again, so a block waiting costs no read of the node's store per run.
   */
  readonly #settling = new Map<string, number>();
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
    const mark = (key: string) => this.mark(key);
    this.fileCheck = new TieredFileCheck({ local, tier, node, publish, mark, ...defined({ notice }) });
  }

  mark(key: string): void {
    this.#dirty.add(key);
    this.#settling.delete(key);
  }

  /** The operator accepted the store (`warren store accept`): the file check's part, then every block written anew. */
  async accepted(): Promise<void> {
    await this.fileCheck.accepted();
    this.#written.clear();
    this.#resynced = false;
  }

  /**
   * The publication of block `key` vanished from the cluster (the watch of this node's says so):
   * forgotten as written, and marked, so the next run writes it again (see the header), whoever
   * wrote it last (this publisher, or the write-back of an operator's accept); a block this node
   * no longer holds (given back, handed over) is then dropped by that run, with no request.
   */
  vanished(key: string): void {
    this.#written.delete(key);
    this.mark(key);
  }

  /** Blocks waiting to be published. */
  get pending(): number {
    return this.#dirty.size;
  }

  /**
   * Publishes the marked blocks that need it now, or with `all` every marked block (after any run in
   * flight). Never throws: failures stay marked.
   */
  run(options: { all?: boolean } = {}): Promise<void> {
    const next = this.#running.then(() => this.#publishAll(options.all === true));
    this.#running = next;
    return next;
  }

  async #publishAll(all: boolean): Promise<void> {
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
      const settles = this.#settling.get(key);
      if (!all && settles !== undefined && this.#o.clock.monotonic() < settles) continue;
      this.#dirty.delete(key);
      this.#settling.delete(key);
      try {
        if (!(await holds(key))) {
          this.#written.delete(key);
          if (await this.#o.isLoan?.(key)) await this.#publishLoan(key);
          continue;
        }
        await this.#publishIfNeeded(key, all);
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
    await this.#write(key, await this.#picture(key));
  }

  /** Publishes block `key` if its change needs a write now (or `all`); keeps it marked while one waits to settle. */
  async #publishIfNeeded(key: string, all: boolean): Promise<void> {
    const picture = await this.#picture(key);
    const written = this.#written.get(key);
    const need = all ? 'write' : publicationNeed(written, picture);
    if (need === 'none') return;
    const settleMs = this.#o.settleMs ?? DEFAULT_SETTLE_MS;
    const settles = (written?.atMs ?? 0) + settleMs;
    if (need === 'settle' && this.#o.clock.monotonic() < settles) {
      this.#dirty.add(key); // covered: written once settled, or with the next write it needs
      this.#settling.set(key, settles);
      return;
    }
    await this.#write(key, picture);
  }

  async #write(key: string, picture: Picture): Promise<void> {
    const { local, tier, node, clock } = this.#o;
    const { allocations, revision, ahead } = picture;
    const [summary] = (await local.ledgers(key)).filter((p) => p.ledger === key);
    failpoint('publication-unwritten');
    await tier.publish({
      key,
      node,
      counts: { allocated: summary?.allocated ?? allocations.length, resting: summary?.resting ?? 0 },
      allocations,
      publishedAt: clock.now(),
      ...defined({ revision, lineage: local.lineage }),
      ...(noSuccession(local.succession) ? {} : { succession: local.succession }),
      ...(ahead.length === 0 ? {} : { ahead }),
    });
    const owners = new Map(allocations.map((a) => [a.address, ownerOf(a)]));
    this.#written.set(key, { owners, ahead: new Set(ahead), atMs: clock.monotonic() });
    this.#o.written?.(key);
  }

  /**
   * The block's allocations, the revision they were read at, and the addresses it would announce:
   * the list and a snapshot (which has the revision, the cursor and the resting addresses) are two
   * reads, so they are taken again while they disagree; after a few rounds the revision read last
   * stands (newer than the list, never older).
   */
  async #picture(key: string): Promise<Picture> {
    const count = this.#o.ahead ?? DEFAULT_AHEAD;
    for (let round = 1; ; round++) {
      const allocations = await this.#o.local.list({ ledger: key });
      const read = await this.#o.local.readLedger(key);
      if (read.kind !== 'snapshot') return { allocations, revision: read.revision, ahead: [] };
      const listed = new Set(allocations.map((a) => a.address));
      const same = read.allocations.length === listed.size && read.allocations.every((a) => listed.has(a));
      if (same || round === 3) {
        // A block the file does not record as this node's (a claim it never recorded) announces nothing.
        const own = read.affinity === this.#o.node;
        const occupied = new Set([...listed, ...read.allocations, ...read.resting.map((r) => r.address)]);
        return { allocations, revision: read.revision, ahead: own ? aheadOf(key, read.cursor, occupied, count) : [] };
      }
    }
  }

  /** Publishes loan ledger `key` as it is now, or withdraws it once given back (see the header). */
  async #publishLoan(key: string): Promise<void> {
    const { local, tier, node, clock } = this.#o;
    if (tier.publishLoan === undefined) return;
    const allocations = await local.list({ ledger: key });
    if (allocations.some((a) => isBookkeeping(a))) return tier.withdraw(key, node);
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
