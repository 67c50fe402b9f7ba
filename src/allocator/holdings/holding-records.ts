/**
 * The cluster's holding records (store/cluster-holdings.ts) as this node reaches them, for the
 * ADD of a holder (holder-plan.ts) and the holdings' lifecycle (holdings.ts) alike.
 *
 * Guarantees: a store that keeps no holdings refuses every holder with INVALID_CONFIG naming the
 * store; a request the cluster does not answer (an I/O failure, or a failure that is no
 * WarrenError) becomes TRY_AGAIN naming the holder and where the records are kept, its cause kept;
 * any other WarrenError passes unchanged.
 */
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { ClusterHoldings } from '../../store/cluster-holdings.ts';

export class HoldingRecords {
  /** The cluster's holdings; undefined when the store keeps none. */
  readonly kept: ClusterHoldings | undefined;
  /** What the records are kept in, for messages. */
  readonly #where: string;
  /** The store's description, for the refusal of a store keeping none. */
  readonly #store: string;

  constructor(kept: ClusterHoldings | undefined, where: string, store: string) {
    this.kept = kept;
    this.#where = where;
    this.#store = store;
  }

  /** What the records are kept in, for messages. */
  get where(): string {
    return this.#where;
  }

  /** The cluster's records, or the refusal of a store that keeps none. */
  of(key: string): ClusterHoldings {
    if (this.kept === undefined)
      throw new WarrenError(
        'INVALID_CONFIG',
        `the address of ${key} cannot be held: sticky addresses need the kubernetes store ` +
          `(this agent's store, ${this.#store}, keeps no holdings)`,
      );
    return this.kept;
  }

  /** `call` to the cluster about holder `key`; its failure to answer made TRY_AGAIN (see the header). */
  async reach<T>(key: string, what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (error instanceof WarrenError && error.code !== 'IO_FAILURE') throw error;
      throw new WarrenError(
        'TRY_AGAIN',
        `could not ${what} the holding of ${key} in ${this.#where}: ${messageOf(error)}`,
        {
          cause: error,
        },
      );
    }
  }
}
