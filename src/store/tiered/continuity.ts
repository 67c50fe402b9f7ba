/**
 * What both cluster tiers keep to tell whether the store behind them is still the one this agent
 * has been writing to: the highest revision seen (a floor no later answer may go below), the store's
 * identity once verified, and the sticky halt that follows when the store lost its data or another
 * agent took this node's name. Each tier says how it reads those signs in its own terms
 * (etcd-tier/continuity.ts: response headers and cluster_id; kubernetes/continuity.ts:
 * resourceVersions, its WarrenClusterState and its Lease) and extends this.
 *
 * A judgement of what a read answered goes through a StoreCheck, begun (`begin`) before the read
 * leaves: the operator may accept the store while the read is out, and then what the check knew
 * (the floor, the identity) was the old store's, and what it concludes says nothing of the store
 * accepted. A check knows that by itself, so no site that halts on an answer compares accepts.
 *
 * Guarantees: the first halt's reason stands until `accept`; nothing else clears a halt; `accept`
 * forgets everything seen (the store as it is now is the one to use) and tells `whenAccepted`
 * listeners, so that what was kept in step with the old store (a watch's copy and the version it
 * resumes from) is read again from the store accepted; the floor only rises; a check begun before
 * an accept halts nothing, records no identity and judges no answer after it (each dropped outcome
 * said at debug), and one begun after it counts as any other.
 */
import { WarrenError } from '../../core/errors.ts';
import { Listeners } from '../../core/listeners.ts';

export type HaltKind = 'store-lost' | 'taken-over';

export interface Halt {
  readonly kind: HaltKind;
  /** Why, for ADD's error, `warren status` and `warren doctor`, with what to do. */
  readonly message: string;
  readonly at: number;
}

/**
 * One check of the store, begun before its read leaves (`StoreContinuity.begin`), through which
 * what the read answered is judged. Once the operator accepted the store since it began, it is
 * outdated: its halt, its identity and its judgement of an answer are dropped.
 */
export interface StoreCheck {
  /** The highest revision seen when the check began: an answer below it went backwards. */
  readonly floor: number;
  /** Whether the operator accepted the store since the check began (what it read is the old store's). */
  readonly outdated: boolean;
  /** Stops writes until `accept` (the first halt's reason stands); nothing when outdated. */
  halt(kind: HaltKind, message: string): void;
  /** Records the store's identity the check verified or created; nothing when outdated. */
  verified(identity: string): void;
  /** Judges the answer to `what` against the check's floor; nothing when outdated. */
  observe(what: string, judge: (floor: number) => void): void;
}

export class StoreContinuity {
  /** Highest revision an answer that carries the store's current one showed; 0 before the first. */
  #revision = 0;
  /** The store's identity once verified or created. */
  #identity: string | undefined;
  #halt: Halt | undefined;
  /** Accepts so far: a check begun before the last one judges nothing of the store accepted. */
  #accepts = 0;
  readonly #now: () => number;
  /** Told of each outcome an outdated check dropped (the agent's log at debug). */
  readonly #debug: (message: string) => void;
  /** Told at each accept (`whenAccepted`). */
  readonly #accepted = new Listeners();

  constructor(now: () => number = Date.now, debug: (message: string) => void = () => undefined) {
    this.#now = now;
    this.#debug = debug;
  }

  /** The floor an answer must not go below: what was seen when its request was sent. */
  floor(): number {
    return this.#revision;
  }

  /** Records a revision seen (the floor rises, never falls). */
  protected raise(revision: number): void {
    if (revision > this.#revision) this.#revision = revision;
  }

  /** A check of the store, begun now: what its read answers is judged through it. */
  begin(): StoreCheck {
    const accepts = this.#accepts;
    const floor = this.#revision;
    const outdated = (): boolean => this.#accepts !== accepts;
    const dropped = (outcome: string): boolean => {
      if (!outdated()) return false;
      this.#debug(`a store check begun before the operator accepted the store judges nothing after it: ${outcome}`);
      return true;
    };
    return {
      floor,
      get outdated() {
        return outdated();
      },
      halt: (kind, message) => {
        if (!dropped(`not halted (${kind}): ${message}`)) this.halt(kind, message);
      },
      verified: (identity) => {
        if (!dropped(`identity ${identity} not recorded`)) this.#identity = identity;
      },
      observe: (what, judge) => {
        if (!dropped(`the answer to "${what}" not judged`)) judge(floor);
      },
    };
  }

  get identity(): string | undefined {
    return this.#identity;
  }

  set identity(value: string) {
    this.#identity = value;
  }

  /**
   * Stops writes until `accept`; the first halt's reason stands. For what is seen now (a refusal, a
   * watch's event); a halt on what a read answered goes through the check begun before it (`begin`).
   */
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
    this.#accepted.tell();
  }

  /**
   * Calls `listener` at each accept, until the function returned is called: what kept a copy of the
   * old store (a watch resuming from a version the store accepted may be far behind) reads it again.
   */
  whenAccepted(listener: () => void): () => void {
    return this.#accepted.add(listener);
  }
}
