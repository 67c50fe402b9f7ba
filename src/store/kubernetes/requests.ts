/**
 * Address requests on the Kubernetes API (`ClusterTier.ask`, `requestOf`, `openRequests`,
 * `requestsLentBy`, `updateRequest`): one WarrenAddressRequest per (range, node), named
 * `requestName(pool, node)` (names.ts), holding {wanted, grants}; its version is its resourceVersion.
 *
 * Guarantees:
 * - `updateRequest` is a PUT guarded by the version the request was read at: a request changed since
 *   (asked again, granted by another owner) is not overwritten, and the answer is undefined;
 * - `ask` keeps the grants already made: it creates the request, or rewrites the one there only at the
 *   version it read (a write in between is read again, a few times, then TRY_AGAIN);
 * - open requests and each lender's requests carry labels (`warren.dev/open`, `lender.warren.dev/<node>`,
 *   objects.ts), so the server selects them; an object whose name does not match its range and node
 *   is not answered as that node's request.
 */
import { WarrenError } from '../../core/errors.ts';
import type { AddressRequest, Grant } from '../tiered/cluster-tier.ts';
import { OPEN_LABEL, RANGE_LABEL, labelValue, lenderLabel, requestName, selectorOf } from './names.ts';
import { requestObject, requestOf } from './objects.ts';
import type { Resource } from './resources.ts';

/** Rounds of create-or-rewrite against a request that keeps changing, before TRY_AGAIN. */
const MAX_ROUNDS = 5;

export class KubeRequests {
  readonly #requests: Resource;

  constructor(requests: Resource) {
    this.#requests = requests;
  }

  async ask(pool: string, node: string, wanted: number): Promise<AddressRequest> {
    const name = requestName(pool, node);
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const created = await this.#requests.create(
        `ask for addresses of range ${pool}`,
        requestObject(name, { pool, node, wanted, grants: [] }),
      );
      if (created.kind === 'created') return this.#requestOrFail(created.object, pool, node);
      const current = await this.requestOf(pool, node);
      if (current === undefined) continue;
      if (current.wanted === wanted) return current;
      const updated = await this.updateRequest(current, current.grants, wanted);
      if (updated !== undefined) return updated;
    }
    throw new WarrenError('TRY_AGAIN', `the request of node ${node} for range ${pool} kept changing; try again`);
  }

  #requestOrFail(object: unknown, pool: string, node: string): AddressRequest {
    const request = requestOf(object);
    if (request === undefined)
      throw new WarrenError('IO_FAILURE', `the API server answered the request of ${node} for ${pool} with no object`);
    return request;
  }

  async requestOf(pool: string, node: string): Promise<AddressRequest | undefined> {
    const request = requestOf(
      await this.#requests.get(`read the request of ${node} for ${pool}`, requestName(pool, node)),
    );
    return request !== undefined && request.pool === pool && request.node === node ? request : undefined;
  }

  async openRequests(pool?: string): Promise<AddressRequest[]> {
    const labels = { [OPEN_LABEL]: 'true', ...(pool === undefined ? {} : { [RANGE_LABEL]: labelValue(pool) }) };
    const items = await this.#requests.listAll('list open address requests', selectorOf(labels));
    return items
      .map(requestOf)
      .filter((r): r is AddressRequest => r !== undefined && r.wanted > 0 && (pool === undefined || r.pool === pool));
  }

  async requestsLentBy(lender: string): Promise<AddressRequest[]> {
    const items = await this.#requests.listAll(`list requests lent to by ${lender}`, `${lenderLabel(lender)}=true`);
    return items.map(requestOf).filter((r): r is AddressRequest => r?.grants.some((g) => g.lender === lender) === true);
  }

  async updateRequest(
    request: AddressRequest,
    grants: readonly Grant[],
    wanted: number,
  ): Promise<AddressRequest | undefined> {
    const { pool, node } = request;
    const body = requestObject(requestName(pool, node), { pool, node, wanted, grants }, request.version);
    const written = await this.#requests.replace(`update the request of ${node} for ${pool}`, body);
    return written.kind === 'replaced' ? this.#requestOrFail(written.object, pool, node) : undefined;
  }
}
