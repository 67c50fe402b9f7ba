/**
 * The node's own file held against what this node published, once per start of the two-tier store
 * (tiered/store.ts): the cluster's copy of this node's blocks is what makes a node whose file went
 * back — `/var/lib/warren` restored from a backup or a VM snapshot, or lost — hand out no address a
 * running container still holds.
 *
 * Guarantees:
 * - until the comparison has run through, the two-tier store hands out no address in a block of
 *   the cluster (it answers TRY_AGAIN naming why) and publishes nothing, so an older file never
 *   writes its view over the newer one in the cluster; a failed comparison is retried by the
 *   store's periodic check and says why in `status`;
 * - a block this node published, whose claim is still this node's or claimed by nobody (deleted by
 *   hand, as the file went back: the claim check claims it again for what the file holds there), is
 *   merged when its publication is newer than the file: the file's revision of the block is lower
 *   than the one published (restored: lower; lost: 0), or the publication names none (an older
 *   Warren published it). Each published allocation the file lacks is recorded in the file as
 *   published: its container's own record, so it is never handed out, a retried ADD gets it back,
 *   and DEL, the journal, containerd, the pod source and GC release it when its container is proven
 *   gone, as any other;
 * - a block the file does not know as this node's (claimed after the copy was taken) is adopted:
 *   its affinity is recorded with its published allocations, so it is not taken for an empty block;
 * - a claim of this node that the file does not know and that no publication of this node lists
 *   addresses in (a kill -9 between the cluster's claim and the file's commit, a restore of the
 *   cluster's data, an object edited by hand) is given back unused (tiered/stray-claims.ts): the
 *   file holds nothing in its block, and the block may be another node's;
 * - where the file holds a published address for another owner, or the published owner at another
 *   address of the range: with the publication newer by revision, the file's record is stale (that
 *   owner released it after the copy was taken) and is replaced; a publication that names no
 *   revision cannot tell, so the file's record stays and the disagreement is told;
 * - a merged block is published again before the comparison counts as done, so the cluster's
 *   revision of it is the file's from then on (a crash after a merge finds nothing more to merge);
 * - a publication of another file (PublishedBlock.lineage: the node's file lost, or a new machine
 *   under its name) is newer only for a block this file never wrote, or where that file took this
 *   one's history over since (tiered/lineage.ts: a copy put back from before a loss): revisions of
 *   two files do not compare, and a block this file wrote since is its own (a copy of the cluster's
 *   data put back can bring an old machine's publication back over it); a file that took another's
 *   publications over records that in its succession before it publishes any of them again;
 * - a merge moves the file's revision of the block past the publication's (LedgerOp `revisionPast`):
 *   a file put back reuses no revision its lost copy published, so when a restore of the cluster's
 *   data brings back a publication written before the file was put back, the file, newer, is not
 *   taken for the older and its records (live containers') are not replaced by that publication's;
 * - a newer publication that lists fewer allocations than it counts (cut to fit one object:
 *   kubernetes/objects.ts) leaves addresses in use that nobody can name: what it lists is taken
 *   back, and no address is handed out in that block (TRY_AGAIN, naming it), nor is it published
 *   over, until an operator accepts the store as it is (`warren store accept`: the membership
 *   `accepting` answers);
 * - what a file holds that the publication does not is kept: its containers are judged by the usual
 *   sources, never released here;
 * - the addresses a newer publication announced as handed out next (`ahead`) are kept as
 *   placeholders until an operator accepts; a file as new as the publication moves its cursor past
 *   them instead (tiered/announced.ts says why, and what that leaves).
 */
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import type { FileCheckStatus } from '../cluster.ts';
import type { ClusterTier, PublishedBlock } from './cluster-tier.ts';
import { giveBackUnrecorded, unrecordedIn } from './stray-claims.ts';
import type { LedgerOp, Store } from '../store.ts';
import { ANNOUNCED_NETWORK, announcedOps, passAnnounced, releaseAnnounced } from './announced.ts';
import { PAGE_LIMIT } from './ranges.ts';
import { succeeded, supersedesFile } from './lineage.ts';
import { NO_SUCCESSION, type Succession } from '../succession.ts';
import { Listeners } from '../../core/listeners.ts';

export interface FileCheckOptions {
  readonly local: Store;
  readonly tier: ClusterTier;
  readonly node: string;
  /** Publishes block `key` now, as the file holds it (throws when it cannot). */
  readonly publish: (key: string) => Promise<void>;
  /** Marks block `key` changed, for the publisher's next runs. */
  readonly mark: (key: string) => void;
  readonly notice?: (message: string) => void;
}

export type { FileCheckStatus } from '../cluster.ts';
const sameOwner = (a: Allocation, b: Allocation): boolean =>
  a.network === b.network && a.containerID === b.containerID && a.ifname === b.ifname;

export class TieredFileCheck {
  readonly #o: FileCheckOptions;
  #compared = false;
  #problem = 'not compared yet';
  #running: Promise<void> | undefined;
  /** The records written from publications, by pool and address. */
  readonly #restored = new Map<string, Allocation>();
  readonly #adopted = new Set<string>();
  readonly #merged = new Set<string>();
  readonly #disagreements = new Set<string>();
  /** Block → why no address is handed out in it until an operator accepts. */
  readonly #withheld = new Map<string, string>();
  /** Placeholders written for announced addresses (told in the notice). */
  #announced = 0;
  /** Told once records were written back from publications (`whenRestored`). */
  readonly #restoredTold = new Listeners();

  constructor(options: FileCheckOptions) {
    this.#o = options;
  }

  get compared(): boolean {
    return this.#compared;
  }

  /** Why allocation in the cluster's blocks waits; undefined once compared. */
  problem(): string | undefined {
    if (this.#compared) return undefined;
    return (
      `node ${this.#o.node}'s file has not been compared with what it published in ${this.#o.tier.description} ` +
      `yet (${this.#problem}): no address is handed out in its blocks until it is`
    );
  }

  /** Compares once (runs after a failure again); never throws: `problem` says why it failed. */
  run(): Promise<void> {
    if (this.#compared) return Promise.resolve();
    this.#running ??= this.#compare()
      .then(() => {
        this.#compared = true;
      })
      .catch((error: unknown) => {
        this.#problem = messageOf(error);
      })
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }

  /**
   * Compares if not yet (or after a failure); throws TRY_AGAIN naming why while it cannot, or, for
   * an allocation in block `key`, while that block is withheld until an operator accepts.
   */
  async compare(key: string, allocates: boolean): Promise<void> {
    await this.run();
    const waiting = this.problem();
    if (waiting !== undefined) throw new WarrenError('TRY_AGAIN', waiting);
    const withheld = allocates ? this.#withheld.get(key) : undefined;
    if (withheld !== undefined)
      throw new WarrenError(
        'TRY_AGAIN',
        `no address is handed out in block ${key} until an operator accepts: ${withheld}`,
      );
  }

  /** Whether block `key` keeps its publication as it is until an operator accepts (nothing is published over it). */
  withholds(key: string): boolean {
    return this.#withheld.has(key);
  }

  /**
   * Tells `listener` once the comparison wrote records back from publications, at once (on the next
   * turn) when it did before; the function returned stops.
   */
  whenRestored(listener: () => void): () => void {
    const stop = this.#restoredTold.add(listener);
    if (this.#compared && this.#restored.size > 0) queueMicrotask(listener);
    return stop;
  }

  /** The operator accepted the store (`warren store accept`): withheld blocks lifted, placeholders released. */
  async accepted(): Promise<void> {
    this.#withheld.clear();
    await releaseAnnounced(this.#o.local, this.#o.mark);
  }

  /** What was found; `restored` counts the records from publications the file still holds as written. */
  async status(): Promise<FileCheckStatus> {
    let restored = 0;
    for (const r of this.#restored.values()) {
      const [held] = await this.#o.local.list({ ledger: r.pool, address: r.address });
      if (held !== undefined && sameOwner(held, r)) restored++;
      else this.#restored.delete(`${r.pool} ${r.address}`); // released since: its container was proven gone
    }
    const announced = (await this.#o.local.list({ network: ANNOUNCED_NETWORK })).length;
    return {
      compared: this.#compared,
      ...(this.#compared ? {} : { problem: this.#problem }),
      restored,
      ...(announced === 0 ? {} : { announced }),
      adopted: [...this.#adopted],
      merged: [...this.#merged],
      disagreements: [...this.#disagreements],
      withheld: [...this.#withheld].map(([key, why]) => `${key}: ${why}`),
    };
  }

  async #compare(): Promise<void> {
    const { tier, node } = this.#o;
    const blocks: PublishedBlock[] = [];
    let next: string | undefined;
    do {
      const page = await tier.published({ node }, { limit: PAGE_LIMIT, ...defined({ continue: next }) });
      blocks.push(...page.items.filter((b) => b.node === node && b.loan !== true));
      next = page.continue === '' ? undefined : page.continue;
    } while (next !== undefined);
    // One listing of this node's claims: what is read grows with its own blocks.
    // A claim this node is taking over is recorded by the handover (tiered/handover.ts), never as an empty block.
    const claims = (await tier.claimsOf(node)).filter((c) => c.takenFrom === undefined);
    const claimed = new Set(claims.map((c) => c.key));
    const { lineage, succession: mine = NO_SUCCESSION } = this.#o.local;
    const taken = blocks.filter((b) => b.lineage === lineage); // its own history's: as far as it went
    const publishing: { key: string; vanished: boolean }[] = [];
    for (const block of blocks) {
      // Another node's claim is not this check's to judge: the claim check is (tiered/claims.ts). A claim gone
      // (deleted by hand just before the file went back: soak, kubernetes seed 3839) leaves this node's last word on
      // the block: merged, so the claim check claims it again for what its containers hold, never for the old file.
      const vanished = !claimed.has(block.key);
      if (vanished && (await tier.claimOf(block.key)) !== undefined) continue;
      // A withheld block keeps its newer publication: the next start finds it again, until accepted.
      if (!(await this.#merge(block, mine, vanished))) continue;
      if (block.lineage !== lineage) taken.push(block);
      if (!this.#withheld.has(block.key)) publishing.push({ key: block.key, vanished });
    }
    // Past what it took over before any of it is published again (lineage.ts): a crash between takes nothing twice.
    const successor = lineage === undefined ? undefined : succeeded(lineage, mine, taken);
    if (successor !== undefined) this.#o.local.succeed?.(successor);
    // One with no claim is published once claimed again (a publication needs the claim).
    for (const { key, vanished } of publishing)
      if (vanished) this.#o.mark(key);
      else await this.#o.publish(key);
    for (const claim of claims) {
      const file = await unrecordedIn(this.#o.local, claim.key, node, claim.uid);
      if (file !== undefined) await giveBackUnrecorded(tier, this.#o.local, claim, file, this.#o.notice);
    }
    const restored = this.#restored.size;
    const announced =
      this.#announced === 0
        ? ''
        : `; ${this.#announced} addresses it had announced it hands out next are kept as placeholders ` +
          'until an operator accepts (`warren store accept`)';
    if (restored > 0) this.#restoredTold.tell();
    if (this.#merged.size > 0)
      this.#o.notice?.(
        `node ${node}'s file held less than it had published in ${tier.description} (restored from an older ` +
          `copy, or lost): ${restored} allocations taken from the publications of blocks ` +
          `${[...this.#merged].join(', ')}` +
          `${this.#adopted.size === 0 ? '' : ` (adopted: ${[...this.#adopted].join(', ')})`}; ` +
          `they are kept until their containers are proven gone${announced}`,
      );
  }

  /**
   * Merges `block`'s publication into the file when it is newer; true when the block is to be
   * published again (its publication's revision is not the file's, or it names none).
   */
  async #merge(block: PublishedBlock, mine: Succession, vanished: boolean): Promise<boolean> {
    const { local, node } = this.#o;
    const read = await local.readLedger(block.key);
    if (read.kind !== 'snapshot') throw new Error(`block ${block.key} read without its contents`);
    const ours = read.affinity === node;
    // Another file's (the node's file lost, or a new machine under its name): its revisions are not this file's.
    // Newer where it took this file's history over (this file a copy put back from before a loss), or where this
    // file holds nothing and the claim stands (neither took the other over: both kept; etcd seed 3943 step 9621);
    // else only where this file never wrote the block (a restore can bring an older one back: etcd seed 3943).
    const another = block.lineage !== undefined && local.lineage !== undefined && block.lineage !== local.lineage;
    const newer =
      supersedesFile(block, local.lineage, mine) || (another && !ours && !vanished && read.allocations.length === 0);
    if (another && !newer && read.revision > 0) return false;
    const byRevision = block.revision !== undefined;
    const published = block.revision ?? 0;
    // Not ours, and the file changed the block after it (gave it up): a restore brought it back (stray-claims.ts).
    if (byRevision && !newer && (ours ? read.revision >= published : read.revision > published)) {
      if (ours) await passAnnounced(local, block, read);
      return false;
    }
    // Nothing published in a block the file does not know: a claim it never recorded, not a file gone back.
    const announced = block.ahead?.length ?? 0;
    if (!ours && block.counts.allocated === 0 && block.allocations.length === 0 && announced === 0) return false;
    const here = new Map((await local.list({ ledger: block.key })).map((a) => [a.address, a]));
    const ops: LedgerOp[] = ours ? [] : [{ op: 'claim', node }];
    const released = new Set<string>();
    const restored: Allocation[] = [];
    /** Records of the file this merge releases, each told once it committed (`#told`). */
    const replaced: Allocation[] = [];
    for (const published of block.allocations) {
      const record: Allocation = { ...published, pool: block.key, node };
      const held = here.get(record.address);
      if (held !== undefined && sameOwner(held, record)) continue;
      const elsewhere = (await local.findByOwner(record)).filter(
        (a) => rangePoolOfKey(a.pool) === rangePoolOfKey(block.key) && a.address !== record.address,
      );
      const stale = [...(held === undefined ? [] : [held]), ...elsewhere];
      if (stale.length > 0 && !byRevision) {
        const holders = stale.map((s) => `${s.containerID} (${s.ifname}) at ${s.address}`).join(', ');
        this.#disagreements.add(
          `${record.address} in block ${block.key}: published for container ${record.containerID} ` +
            `(${record.ifname}), held here by ${holders}`,
        );
        continue;
      }
      for (const s of stale) {
        if (s.pool === block.key) {
          if (!released.has(s.address)) ops.push({ op: 'release', address: s.address });
          released.add(s.address);
          replaced.push(s);
        } else this.#told(await this.#releaseElsewhere(s));
      }
      ops.push({ op: 'allocate', allocation: record });
      restored.push(record);
    }
    const before = new Set(released);
    const announcing = byRevision ? announcedOps(block, node, here, released) : [];
    for (const address of released) if (!before.has(address)) replaced.push(...[here.get(address) ?? []].flat());
    ops.push(...announcing);
    this.#announced += announcing.filter((op) => op.op === 'allocate').length;
    const unnamed = block.counts.allocated - block.allocations.length;
    if (unnamed > 0)
      this.#withheld.set(
        block.key,
        `its publication, newer than node ${node}'s file, names ${block.allocations.length} of the ` +
          `${block.counts.allocated} addresses it held (cut to fit one object): ${unnamed} in use cannot be taken back`,
      );
    if (ops.length === 0) return true; // merged before (a run that failed later): published again
    // Its revisions go on past the publication's: none repeats one that publication, or a copy of the cluster's
    // data put back later, carries (else the file, newer, was taken for the older: soak, etcd seed 3943, step 1645).
    if (byRevision) ops.push({ op: 'revisionPast', revision: published });
    const result = await local.commit(block.key, read.revision, ops);
    if (result.kind === 'conflict')
      throw new WarrenError('TRY_AGAIN', `block ${block.key} could not be merged: ${result.reason}`);
    for (const r of restored) this.#restored.set(`${r.pool} ${r.address}`, r);
    for (const r of replaced) this.#told(r);
    if (!ours) this.#adopted.add(block.key);
    this.#merged.add(block.key);
    return true;
  }

  /**
   * Tells one record of the file a merge released (replaced by the newer publication's, or by an
   * announced address's placeholder), naming its container and address: every release is explained.
   */
  #told(stale: Allocation): void {
    this.#o.notice?.(
      `file check: released the record of container ${stale.containerID} (${stale.ifname}) at ${stale.address} ` +
        `in block ${stale.pool}: stale, the newer publication of node ${this.#o.node} has the address otherwise`,
    );
  }

  /** Releases a stale record of a published owner in another block of its range (it moved after the copy). */
  async #releaseElsewhere(stale: Allocation): Promise<Allocation> {
    const read = await this.#o.local.readLedger(stale.pool);
    const result = await this.#o.local.commit(stale.pool, read.revision, [{ op: 'release', address: stale.address }]);
    if (result.kind === 'conflict')
      throw new WarrenError('TRY_AGAIN', `${stale.address} in ${stale.pool} could not be released: ${result.reason}`);
    return stale;
  }
}
