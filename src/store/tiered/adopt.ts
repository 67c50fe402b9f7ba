/**
 * Claims of this node that its own store does not know: the cluster's claim was made, and the agent
 * died before the local commit that records it (kill -9 between the two, a crash, a power cut). The
 * cache of claims reads a range only when it is first touched, so without this such a block would be
 * held in the cluster by a node that never uses it, and neither given back nor lent: stranded.
 *
 * `adoptUnrecorded` reads every claim of this node (one listing, what it reads grows with this
 * node's blocks) and records in the node's store, as this node's empty block, each claimed block it
 * does not know whose publication lists no allocation. From then on it is an own block like any
 * other: listed (`warren nodes`, `warren pools`), used by ADDs, and given back by the upkeep once it
 * has stayed empty for the block grace (allocator/give-back.ts). A claim whose publication lists
 * allocations is not adopted as empty: the node's file has lost what it published (a restored disk),
 * which is the node's own recovery to decide, never an empty block to give back.
 */
import type { ClusterTier } from './cluster-tier.ts';
import type { Store } from '../store.ts';
import type { TieredClaims } from './claims.ts';

export interface AdoptionParts {
  readonly local: Store;
  readonly tier: ClusterTier;
  readonly claims: TieredClaims;
  readonly node: string;
  readonly notice: (message: string) => void;
}

export interface Adoption {
  /** Blocks recorded here as this node's empty blocks. */
  readonly adopted: string[];
  /** Claimed blocks unknown here whose publication lists allocations: left as they are. */
  readonly published: string[];
}

export async function adoptUnrecorded(p: AdoptionParts): Promise<Adoption> {
  const adopted: string[] = [];
  const published: string[] = [];
  for (const claim of await p.claims.loadAll()) {
    const read = await p.local.readPool(claim.key);
    if (read.kind !== 'snapshot' || read.affinity === p.node) continue;
    if (read.allocations.length > 0) continue; // addresses here already: the block is known
    const publication = await p.tier.publicationOf(claim.key);
    if (publication !== undefined && Math.max(publication.counts.allocated, publication.allocations.length) > 0) {
      published.push(claim.key);
      continue;
    }
    const result = await p.local.commit(claim.key, read.revision, [{ op: 'claim', node: p.node }]);
    if (result.kind === 'committed') adopted.push(claim.key);
  }
  return { adopted, published };
}

/** `adoptUnrecorded` until it once succeeds (a process's claims unknown to its store date from before it). */
export class ClaimAdoption {
  readonly #p: AdoptionParts;
  #done = false;

  constructor(parts: AdoptionParts) {
    this.#p = parts;
  }

  /** The keys adopted by this run; none once a run succeeded. Throws when the cluster cannot be read. */
  async run(): Promise<string[]> {
    if (this.#done) return [];
    const { adopted, published } = await adoptUnrecorded(this.#p);
    this.#done = true;
    const node = this.#p.node;
    if (adopted.length > 0)
      this.#p.notice(
        `node ${node} holds claims its store did not record (claimed just before the agent stopped): ` +
          `${adopted.join(', ')}; recorded as empty blocks, given back after the block grace`,
      );
    if (published.length > 0)
      this.#p.notice(
        `node ${node} holds claims its store did not record, whose publications list allocations: ` +
          `${published.join(', ')}; its store lost what it published`,
      );
    return adopted;
  }
}
