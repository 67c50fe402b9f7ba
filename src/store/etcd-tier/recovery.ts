/**
 * The recovery marker on etcd (recovery.ts): the key `recovery` under the store's prefix, a JSON
 * Recovery, followed by a watch once the node announced (membership.ts tells `seen`), and read
 * at an upkeep run only while that watch is not synced or the node is halted.
 *
 * Guarantees: the marker is changed only by a transaction comparing the key's mod revision with the
 * one read (created only where there is none), so two nodes joining or leaving at once both land;
 * its calls go through the store's `call` (each response's header checked), not through the tier's
 * guarded writes: they go out while the agent is halted, since they only ever stop allocation or
 * record the operator's word.
 */
import type { Namespace } from 'etcd3';
import { WarrenError } from '../../core/errors.ts';
import { type Recovery, joined, left, recoveryOf } from '../tiered/recovery.ts';

/** The marker's key, under the prefix. */
export const RECOVERY_KEY = 'recovery';
const MAX_ROUNDS = 8;

export interface EtcdRecoveryOptions {
  readonly ns: Namespace;
  /** Runs one etcd call through the store (TRY_AGAIN on failure; the header checked). */
  readonly call: <T>(what: string, body: () => Promise<T>) => Promise<T>;
  readonly now?: () => number;
}

function parse(value: Buffer | undefined): Recovery | undefined {
  if (value === undefined) return undefined;
  try {
    return recoveryOf(JSON.parse(value.toString('utf8')));
  } catch {
    return undefined;
  }
}

export class EtcdRecovery {
  readonly #o: EtcdRecoveryOptions;
  /** The marker as last read. */
  #recovery: Recovery | undefined;

  constructor(options: EtcdRecoveryOptions) {
    this.#o = options;
  }

  current(): Recovery | undefined {
    return this.#recovery;
  }

  /** The marker as a watch shows it now (its value; undefined once deleted). */
  seen(value: Buffer | undefined): void {
    this.#recovery = parse(value);
  }

  async #get(): Promise<{ recovery: Recovery | undefined; mod: string }> {
    const response = await this.#o.call('read the recovery marker', () => this.#o.ns.get(RECOVERY_KEY).exec());
    const kv = response.kvs[0];
    return { recovery: parse(kv?.value), mod: kv?.mod_revision ?? '0' };
  }

  async read(): Promise<Recovery | undefined> {
    this.#recovery = (await this.#get()).recovery;
    return this.#recovery;
  }

  async join(nodes: readonly string[], reason: string): Promise<void> {
    const now = this.#o.now ?? Date.now;
    await this.#change((recovery) => joined(recovery, nodes, reason, now()));
  }

  async leave(node: string): Promise<void> {
    await this.#change((recovery) => (recovery === undefined ? undefined : left(recovery, node)));
  }

  async #change(change: (recovery: Recovery | undefined) => Recovery | undefined): Promise<void> {
    const ns = this.#o.ns;
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const { recovery, mod } = await this.#get();
      const next = change(recovery);
      if (JSON.stringify(next) === JSON.stringify(recovery)) {
        this.#recovery = next;
        return;
      }
      const guard =
        mod === '0' ? ns.if(RECOVERY_KEY, 'Create', '==', 0) : ns.if(RECOVERY_KEY, 'Mod', '==', Number(mod));
      const write =
        next === undefined ? ns.delete().key(RECOVERY_KEY) : ns.put(RECOVERY_KEY).value(JSON.stringify(next));
      const done = await this.#o.call('write the recovery marker', () => guard.then(write).commit());
      if (done.succeeded) {
        this.#recovery = next;
        return;
      }
    }
    throw new WarrenError('TRY_AGAIN', `the recovery marker ${RECOVERY_KEY} kept changing; try again`);
  }
}
