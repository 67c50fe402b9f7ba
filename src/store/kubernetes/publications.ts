/**
 * Published allocations on the Kubernetes API (`ClusterTier.publish`, `published`): one
 * WarrenBlockPublication per published block (deploy/crds/), named as its WarrenBlock and carrying
 * its labels (`warren.dev/range`, `warren.dev/node`), kept apart from the claim so that a listing of
 * claims (placement) never reads allocations, and a reader of allocations selects them by label.
 *
 * Guarantees:
 * - a publication costs one request (a PUT guarded by the uid and resourceVersion this tier last
 *   wrote); a block's first costs two (its claim read, then a create), three when one was left
 *   behind (read, then replaced). The claim is read again whenever a write finds the publication
 *   gone or changed: `publish` throws when the block's object is gone or another node's;
 * - only the block's owner writes it; a forgotten node's publications are deleted with its claims,
 *   so its next write finds its publication gone, reads the claim and stops;
 * - `unpublish` (after a claim was removed) deletes the publication this tier wrote, by its uid and
 *   resourceVersion while no one wrote it since (one request), else the one found if it names the
 *   claim's node (a read, then a delete at its version; a read alone when there is none): one
 *   claimed again since by another node is never deleted, though its owner took the object over in
 *   place, keeping the uid (found by the soak, kubernetes seed 3839 step 27685: a node giving back a
 *   claim edited to name it deleted the publication of the node whose claim it had been, which then
 *   could not keep a third from claiming the block and handing out an address its container held).
 *   A failure to delete is told (`notice`), not thrown: the claim is gone already, and the next
 *   owner's first write replaces what was left behind;
 * - a publication is kept within the object size limit (objects.ts);
 * - a loan ledger's publication (`loan`, labelled `warren.dev/loan`) names no claim, so none is read:
 *   the address's latest borrower replaces whatever was published under its key; `withdraw`
 *   deletes it only while it names the withdrawing node (a read, then a delete at its uid and
 *   resourceVersion: a replacement keeps the uid).
 */
import { defined } from '../../core/defined.ts';
import { messageOf, WarrenError } from '../../core/errors.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import type { BlockClaim, Page, PublishedBlock } from '../tiered/cluster-tier.ts';
import { NODE_LABEL, RANGE_LABEL, blockName, labelValue, selectorOf } from './names.ts';
import { claimOfObject, metaOf, publicationObject, publishedOf } from './objects.ts';
import { FULL_LIST_PAGE, type Resource } from './resources.ts';

/** Rounds of read-and-write against a publication that keeps changing, before TRY_AGAIN. */
const MAX_ROUNDS = 5;

export interface KubePublicationsOptions {
  readonly publications: Resource;
  readonly blocks: Resource;
  readonly notice: ((message: string) => void) | undefined;
}

export class KubePublications {
  readonly #o: KubePublicationsOptions;
  /**
   * The uid and resourceVersion this tier last saw of the publications it wrote, by block key: what
   * the next write is guarded by, so that one costs one request. Forgotten at give-back.
   */
  readonly #seen = new Map<string, { uid: string; version: string; node: string }>();

  constructor(options: KubePublicationsOptions) {
    this.#o = options;
  }

  /** The WarrenBlockPublications, for the watch of a node's (tier-watches.ts). */
  get resource(): Resource {
    return this.#o.publications;
  }

  async publish(block: PublishedBlock): Promise<void> {
    const { publications } = this.#o;
    const name = blockName(block.key);
    const what = `publish block ${block.key}`;
    let checked = false;
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const seen = this.#seen.get(block.key);
      const last = seen?.node === block.node ? seen : undefined;
      // No publication of it on record (the first, a restart, a conflict): the block must be this node's.
      // A loan names no claim: the address's last borrower publishes it (`publishLoan`).
      if (block.loan === true) checked = true;
      if (last === undefined && !checked) {
        await this.#mustHold(block);
        checked = true;
      }
      const { object, truncated } = publicationObject(
        name,
        block,
        last === undefined ? undefined : { uid: last.uid, resourceVersion: last.version },
      );
      if (truncated)
        this.#o.notice?.(
          `block ${block.key} holds more allocations than its object can publish (${block.allocations.length}): ` +
            `published ${(object.spec as { allocations: unknown[] }).allocations.length}, without network namespaces`,
        );
      const written =
        last === undefined ? await publications.create(what, object) : await publications.replace(what, object);
      this.#seen.delete(block.key);
      if (written.kind === 'created' || written.kind === 'replaced') {
        const meta = metaOf(written.object);
        if (meta !== undefined)
          this.#seen.set(block.key, { uid: meta.uid, version: meta.resourceVersion, node: block.node });
        return;
      }
      if (written.kind === 'exists') {
        // One left behind (this node's before a restart, or a former owner's): replace it, the claim checked.
        if (!checked) await this.#mustHold(block);
        checked = true;
        const found = metaOf(await publications.get(`read the allocations of block ${block.key}`, name));
        if (found !== undefined)
          this.#seen.set(block.key, { uid: found.uid, version: found.resourceVersion, node: block.node });
        continue;
      }
      // Gone or changed under this tier (its claim forgotten?): read the claim again.
      checked = false;
    }
    throw new WarrenError('TRY_AGAIN', `block ${block.key} kept changing while its allocations were published`);
  }

  /** Throws unless the block is claimed by the publishing node. */
  async #mustHold(block: PublishedBlock): Promise<void> {
    const { blocks } = this.#o;
    const claim = claimOfObject(await blocks.get(`read block ${block.key}`, blockName(block.key)));
    if (claim === undefined || claim.key !== block.key || claim.node !== block.node)
      throw new WarrenError(
        'IO_FAILURE',
        `block ${block.key} is not claimed by node ${block.node} (${
          claim === undefined || claim.key !== block.key ? 'its object is gone' : `node ${claim.node} holds it`
        }): its allocations were not published`,
      );
  }

  /** Deletes the publication of a claim just removed (see the header). */
  async unpublish(claim: BlockClaim): Promise<void> {
    const seen = this.#seen.get(claim.key);
    this.#seen.delete(claim.key);
    try {
      if (seen?.node === claim.node) {
        const done = await this.#o.publications.remove(
          `remove the allocations of block ${claim.key}`,
          blockName(claim.key),
          { uid: seen.uid, resourceVersion: seen.version },
        );
        if (done !== 'conflict') return;
      }
      await this.withdraw(claim.key, claim.node); // written since (by another owner, maybe): read, and judged
    } catch (error) {
      this.#o.notice?.(`block ${claim.key} was given back; its published allocations stay: ${messageOf(error)}`);
    }
  }

  /**
   * Deletes the publication of `key` (a loan ledger's or a block's) while it is `node`'s: read, then
   * deleted at the version read (uid and resourceVersion), since the address's next borrower (or the
   * block's next owner) replaces the object in place (same uid). One that changed meanwhile is read
   * again; another node's is left.
   */
  async withdraw(key: string, node: string): Promise<void> {
    const { publications } = this.#o;
    const name = blockName(key);
    this.#seen.delete(key);
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const found = await publications.get(`read the publication of ${key}`, name);
      const published = publishedOf(found);
      const meta = metaOf(found);
      if (published === undefined || meta === undefined || published.key !== key || published.node !== node) return;
      const done = await publications.remove(`withdraw the publication of ${key}`, name, {
        uid: meta.uid,
        resourceVersion: meta.resourceVersion,
      });
      if (done !== 'conflict') return;
    }
    throw new WarrenError('TRY_AGAIN', `the publication of ${key} kept changing while it was withdrawn`);
  }

  /** The publication of block (or loan ledger) `key`, whoever's it is: one read. */
  async of(key: string): Promise<PublishedBlock | undefined> {
    const found = publishedOf(await this.#o.publications.get(`read the allocations of block ${key}`, blockName(key)));
    return found?.key === key ? found : undefined;
  }

  /** One page of publications, of range `pool` and/or node `node` when given. */
  async list(
    filter: { pool?: string; node?: string },
    page?: { limit: number; continue?: string },
  ): Promise<Page<PublishedBlock>> {
    const { publications } = this.#o;
    const labels = {
      ...(filter.pool === undefined ? {} : { [RANGE_LABEL]: labelValue(filter.pool) }),
      ...(filter.node === undefined ? {} : { [NODE_LABEL]: labelValue(filter.node) }),
    };
    const got = await publications.list(
      'list published blocks',
      selectorOf(labels),
      page?.limit ?? FULL_LIST_PAGE,
      page?.continue,
    );
    const items = got.items
      .map(publishedOf)
      .filter(
        (b): b is PublishedBlock =>
          b !== undefined &&
          (filter.pool === undefined || rangePoolOfKey(b.key) === filter.pool) &&
          (filter.node === undefined || b.node === filter.node),
      );
    return { items, ...defined({ continue: got.continue }) };
  }
}
