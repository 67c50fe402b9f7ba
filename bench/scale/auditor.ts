/**
 * The scale harness's independent auditor: is any address held twice across the cluster? It reads
 * what holds addresses where it is kept — every running node's own file (through the node's store,
 * as `warren allocations` lists it) and the cluster's objects (every WarrenBlock claim and every
 * WarrenBlockPublication, listed over the API with a kubeconfig of its own) — and takes their union.
 * It uses none of the allocator's bookkeeping in memory, so an allocator that believes an address
 * free while another node's file holds it is caught.
 *
 * The union, and why:
 * - a running node's file is the truth for the addresses it holds (the cluster's copy of its blocks
 *   trails it by a publication), so its own publications are not read over it;
 * - a node that is not running (crashed, lost) has no file the auditor can trust: what the cluster
 *   published for it stands for its addresses until its blocks are freed (its publications deleted
 *   with its claims), so each of its published allocations is a holder;
 * - a lender's placeholder for an address it lent (`warren.dev/lent`) and a borrower's mark of a loan
 *   given back (`warren.dev/returned`, also left on a loan whose address moved into a block the
 *   borrower took over) are bookkeeping, not holders;
 * - a holder is `node/container`: the same container on the same node twice (its file and its
 *   publication) is one holder; two holders of one address are a duplicate.
 * Besides duplicates it counts `strays`: addresses a running node's file holds in a block the
 * cluster says is another node's (or no node's), not lent to it — where a duplicate would come from.
 */
import { LENT_NETWORK, RETURNED_NETWORK } from '../../src/allocator/lending/loans.ts';
import { KubeApiClient } from '../../src/store/kubernetes/api-client.ts';
import { API_VERSION } from '../../src/store/kubernetes/names.ts';
import { claimOfObject, publishedOf } from '../../src/store/kubernetes/objects.ts';
import { loadKubeConfig } from '../../src/sources/kubernetes/kubeconfig.ts';
import type { Store } from '../../src/store/store.ts';

/** A node whose file is read. */
export interface AuditedNode {
  readonly name: string;
  readonly store: Pick<Store, 'list'>;
}

export interface AuditReport {
  /** Addresses held, each once (a holder per address). */
  readonly held: number;
  /** Held by running nodes' files, and by the publications of nodes not running. */
  readonly fromFiles: number;
  readonly fromPublications: number;
  /** Blocks claimed in the cluster, and publications read. */
  readonly claims: number;
  readonly publications: number;
  /** `address: holder, holder` for each address held by two or more. */
  readonly duplicates: readonly string[];
  /** `address: node (block claimed by …)` for a file's address outside its node's claims, not lent. */
  readonly strays: readonly string[];
}

const PAGE = 500;
const NOT_HOLDERS = new Set([LENT_NETWORK, RETURNED_NETWORK]);

export class Auditor {
  readonly #client: KubeApiClient;

  private constructor(client: KubeApiClient) {
    this.#client = client;
  }

  /** An auditor reading the cluster with the kubeconfig at `path` (none of the nodes' own). */
  static async open(path: string): Promise<Auditor> {
    return new Auditor(
      await KubeApiClient.open({ kubeConfig: loadKubeConfig(path), userAgent: 'warren-scale-auditor' }),
    );
  }

  /** Every object of a cluster-scoped Warren resource, page by page. */
  async #list(plural: string): Promise<unknown[]> {
    const items: unknown[] = [];
    let next: string | undefined;
    do {
      const answer = await this.#client.send(`list ${plural}`, {
        method: 'GET',
        path: `/apis/${API_VERSION}/${plural}`,
        query: { limit: PAGE, continue: next },
      });
      if (answer.status !== 200) throw this.#client.refusal(`list ${plural}`, answer, 'list', plural);
      const body = answer.body as { items?: unknown[]; metadata?: { continue?: string } };
      items.push(...(body.items ?? []));
      next = body.metadata?.continue || undefined;
    } while (next !== undefined);
    return items;
  }

  /** The claims of the cluster now: node by block key. */
  async claims(): Promise<Map<string, string>> {
    const claims = new Map<string, string>();
    for (const object of await this.#list('warrenblocks')) {
      const claim = claimOfObject(object);
      if (claim !== undefined) claims.set(claim.key, claim.node);
    }
    return claims;
  }

  /** The union of `running` nodes' files (allocations of `rangePool`) and the cluster's objects. */
  async audit(running: readonly AuditedNode[], rangePool: string): Promise<AuditReport> {
    const holders = new Map<string, Set<string>>();
    const hold = (address: string, holder: string): void => {
      holders.set(address, (holders.get(address) ?? new Set()).add(holder));
    };
    const names = new Set(running.map((n) => n.name));
    const claims = await this.claims();
    const lent = new Set<string>(); // `lender address`
    const files: { node: string; pool: string; address: string }[] = [];
    for (const node of running) {
      for (const a of await node.store.list({ rangePool })) {
        if (a.network === LENT_NETWORK) lent.add(`${node.name} ${a.address}`);
        if (NOT_HOLDERS.has(a.network)) continue;
        hold(a.address, `${node.name}/${a.containerID}`);
        files.push({ node: node.name, pool: a.pool, address: a.address });
      }
    }
    let fromPublications = 0;
    const publications = await this.#list('warrenblockpublications');
    for (const object of publications) {
      const block = publishedOf(object);
      if (block === undefined || names.has(block.node) || !block.key.startsWith(`${rangePool}#`)) continue;
      for (const a of block.allocations) {
        if (NOT_HOLDERS.has(a.network)) continue;
        fromPublications++;
        hold(a.address, `${block.node}/${a.containerID} (published)`);
      }
    }
    const strays = files.flatMap(({ node, pool, address }) => {
      const owner = claims.get(pool);
      if (owner === node || (owner !== undefined && lent.has(`${owner} ${address}`))) return [];
      return [`${address}: ${node} (block ${pool} claimed by ${owner ?? 'no node'})`];
    });
    const duplicates = [...holders]
      .filter(([, h]) => h.size > 1)
      .map(([address, h]) => `${address}: ${[...h].sort().join(', ')}`);
    return {
      held: holders.size,
      fromFiles: files.length,
      fromPublications,
      claims: claims.size,
      publications: publications.length,
      duplicates,
      strays,
    };
  }

  close(): void {
    this.#client.close();
  }
}
