/**
 * One attempt of a release intent, as the pipeline runs it when the intent's key has its turn:
 * what the intent's holder holds now and what can be observed of its namespaces now, the rule's
 * action on that (release/rule.ts `decide`), and the action applied — addresses released through
 * the allocator, exited containers marked and forgotten (exited-containers.ts), every release
 * logged (log.ts) and told to telemetry and `onReleased`.
 *
 * Guarantees:
 * - decides from the state read in this attempt, never from what a source believed when it
 *   queued the intent; releasing what is no longer held is a no-op;
 * - releases only what the action names, each owner within its limits (made at or before the
 *   moment the intent was observed, still in the namespace proven gone), which the allocator
 *   applies again inside its commit round;
 * - a failure (a read or a commit) is thrown to the caller with nothing marked: retrying is the
 *   pipeline's business.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { momentOf } from '../../core/moment.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { NetnsObservation, NetnsObserver } from '../../sources/netns.ts';
import type { Allocator } from '../../allocator/allocator.ts';
import type { Store } from '../../store/store.ts';
import type { ReleaseSource } from '../../api/dashboard.ts';
import { type AddressHolder, type ReleaseIntent, addressHolderOf, sourceOf } from './intent.ts';
import { type OwnerRelease, type ReleaseAction, decide, needsNamespaces } from './rule.ts';
import { ReleaseLog } from './log.ts';
import type { ExitedContainers } from './exited-containers.ts';
import { NO_TELEMETRY, type Telemetry } from '../metrics/telemetry.ts';

export interface ReleaseApplierOptions {
  readonly allocator: Allocator;
  readonly store: Store;
  readonly observer: NetnsObserver;
  readonly clock: Clock;
  readonly logger: Logger;
  /** This node: container and pod intents judge only what this node's agent allocated. */
  readonly node: string;
  /**
   * The store is shared by nodes (a fact of the options, never asked of the store): another
   * node's allocations are ordered by the wall clock alone (createdMoment).
   */
  readonly shared: boolean;
  /** Containers waiting for their namespace: marked and forgotten as actions are applied. */
  readonly exited: ExitedContainers;
  /** Told of every release committed (Kubernetes reports them as Events on the pod). */
  readonly onReleased?: (intent: ReleaseIntent, released: readonly Allocation[], why: string) => void;
  /** Told of releases by source (metrics, the last-releases list). */
  readonly telemetry?: Telemetry;
}

/** What one attempt of an intent came to: what it released and the action the rule chose. */
export interface Outcome {
  readonly released: readonly Allocation[];
  readonly action: ReleaseAction;
}

export class ReleaseApplier {
  readonly #o: ReleaseApplierOptions;
  readonly #log: ReleaseLog;
  readonly #telemetry: Telemetry;

  constructor(options: ReleaseApplierOptions) {
    this.#o = options;
    this.#log = new ReleaseLog(options.logger);
    this.#telemetry = options.telemetry ?? NO_TELEMETRY;
  }

  /** Decides and applies `intent` now; `source` names who asked when not its own source. */
  async apply(intent: ReleaseIntent, source?: ReleaseSource): Promise<Outcome> {
    const held = await this.#held(addressHolderOf(intent));
    const action = decide(intent, held, {
      exited: 'containerID' in intent && this.#o.exited.has(intent.containerID),
      namespaces: needsNamespaces(intent) ? this.#observe(held) : new Map(),
      now: momentOf(this.#o.clock),
      boot: this.#o.clock.boot,
      // Where nodes share the store, another node's stamps are another host's (createdMoment).
      ...(this.#o.shared ? { node: this.#o.node } : {}),
    });
    return { released: await this.#apply(intent, source, action), action };
  }

  /**
   * What the intent's holder holds now: an owner anywhere; a container or pod on this node. Never a
   * bookkeeping record (ipam/bookkeeping.ts): it holds an address for no container, so no intent
   * about a container, a pod or an attachment releases it.
   */
  async #held(holder: AddressHolder): Promise<Allocation[]> {
    return (await this.#holding(holder)).filter((a) => !isBookkeeping(a));
  }

  #holding(holder: AddressHolder): Promise<Allocation[]> {
    switch (holder.kind) {
      case 'owner':
        return this.#o.store.findByOwner(holder.owner);
      case 'container':
        return this.#o.store.list({ containerID: holder.containerID, node: this.#o.node });
      case 'pod':
        return this.#o.store.list({ podUID: holder.podUID, node: this.#o.node });
      default: {
        const never: never = holder;
        throw new Error(`unhandled holder ${JSON.stringify(never)}`);
      }
    }
  }

  #observe(held: readonly Allocation[]): Map<string, NetnsObservation> {
    const cache = new Map<string, { observable: boolean; reason?: string }>();
    const seen = new Map<string, NetnsObservation>();
    for (const a of held) {
      if (a.netns !== undefined && !seen.has(a.netns)) seen.set(a.netns, this.#o.observer.observe(a.netns, cache));
    }
    return seen;
  }

  async #apply(intent: ReleaseIntent, source: ReleaseSource | undefined, action: ReleaseAction): Promise<Allocation[]> {
    const exited = this.#o.exited;
    switch (action.kind) {
      case 'release':
      case 'wait-until':
      case 'wait-for-namespace': {
        const released = await this.#release(action.owners);
        this.#released(intent, source, released, action.why);
        if (!('containerID' in intent)) return released;
        // A container released is done with; one still waiting speaks for its latest exit.
        if (action.kind === 'release') exited.forget(intent.containerID);
        if (action.kind === 'wait-for-namespace' && exited.wait(intent, action.waitingFor)) {
          this.#log.exited(intent, action.waitingFor);
        }
        return released;
      }
      case 'drop':
        if ('containerID' in intent && action.forgetExited) exited.forget(intent.containerID);
        this.#log.dropped(intent, action.reason);
        return [];
      default: {
        const never: never = action;
        throw new Error(`unhandled action ${JSON.stringify(never)}`);
      }
    }
  }

  async #release(owners: readonly OwnerRelease[]): Promise<Allocation[]> {
    const released: Allocation[] = [];
    for (const { owner, createdAtOrBefore, netns } of owners) {
      const limits = {
        ...defined({ createdAtOrBefore, netns }),
      };
      released.push(...(await this.#o.allocator.release(owner, undefined, limits)));
    }
    return released;
  }

  #released(
    intent: ReleaseIntent,
    source: ReleaseSource | undefined,
    released: readonly Allocation[],
    why: string,
  ): void {
    if (released.length > 0) {
      this.#o.onReleased?.(intent, released, why);
      const adapter = 'via' in intent ? intent.via?.adapter : undefined;
      this.#telemetry.released(source ?? sourceOf(intent), released, why, adapter);
    }
    this.#log.released(intent, released, why);
  }
}
