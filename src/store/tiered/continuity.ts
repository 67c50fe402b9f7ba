/**
 * What both cluster tiers keep to tell whether the store behind them is still the one this agent
 * has been writing to: the highest revision seen (a floor no later answer may go below), the store's
 * identity once verified, and the sticky halt that follows when the store lost its data or another
 * agent took this node's name. Each tier says how it reads those signs in its own terms
 * (etcd-tier/continuity.ts: response headers and cluster_id; kubernetes/continuity.ts:
 * resourceVersions, its WarrenClusterState and its Lease) and extends this.
 *
 * Guarantees: the first halt's reason stands until `accept`; nothing else clears a halt; `accept`
 * forgets everything seen (the store as it is now is the one to use); the floor only rises.
 */
import { WarrenError } from '../../core/errors.ts';

export type HaltKind = 'store-lost' | 'taken-over';

export interface Halt {
  readonly kind: HaltKind;
  /** Why, for ADD's error, `warren status` and `warren doctor`, with what to do. */
  readonly message: string;
  readonly at: number;
}

export class StoreContinuity {
  /** Highest revision an answer that carries the store's current one showed; 0 before the first. */
  #revision = 0;
  /** The store's identity once verified or created. */
  #identity: string | undefined;
  #halt: Halt | undefined;
  /** Accepts so far: what a check sent before the last one read says nothing of the store accepted. */
  #accepts = 0;
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** The floor an answer must not go below: what was seen when its request was sent. */
  floor(): number {
    return this.#revision;
  }

  /** Records a revision seen (the floor rises, never falls). */
  protected raise(revision: number): void {
    if (revision > this.#revision) this.#revision = revision;
  }

  /** How many times the operator accepted the store: a check compares it across its reads. */
  get accepts(): number {
    return this.#accepts;
  }

  get identity(): string | undefined {
    return this.#identity;
  }

  set identity(value: string) {
    this.#identity = value;
  }

  /** Stops writes until `accept`; the first halt's reason stands. */
  halt(kind: HaltKind, message: string): void {
    this.#halt ??= { kind, message, at: this.#now() };
  }

  halted(): Halt | undefined {
    return this.#halt;
  }

  /** Throws TRY_AGAIN with the halt's reason while halted. */
  refuseWhileHalted(): void {
    if (this.#halt !== undefined) throw new WarrenError('TRY_AGAIN', this.#halt.message);
  }

  /** The operator's word: the store as it is now is the one to use. Forgets everything seen. */
  accept(): void {
    this.#accepts += 1;
    this.#halt = undefined;
    this.#revision = 0;
    this.#identity = undefined;
  }
}
