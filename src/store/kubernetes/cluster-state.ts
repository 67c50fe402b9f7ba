/**
 * The kubernetes store's own state object: the WarrenClusterState named `store` (deploy/crds/), its
 * `spec.identity` a random id, and while the cluster recovers from a store that lost its data its
 * `spec.recovery`, the marker every agent honours (recovery.ts).
 *
 * Guarantees:
 * - the identity is written once, by the first agent that finds no object, and never deleted by
 *   Warren (its RBAC has no delete on the kind): an agent that knows an identity (verified in this
 *   process, or recorded in its state directory at its last run) never makes one where there is
 *   none, it halts instead (kubernetes/continuity.ts), and so does one that finds another;
 * - of two agents creating it at once one wins (create by name) and both adopt the winner's;
 * - the marker is changed only by a PUT at the resourceVersion read (optimistic concurrency), so two
 *   nodes joining or leaving at once both land; a node that halted on a wiped store, where there is
 *   no object at all, creates it with a new identity and the marker, so an agent started afterwards
 *   sees the marker before it allocates;
 * - these writes go out while the agent is halted (they only ever stop allocation, or record the
 *   operator's word), through an unguarded Resource; their answers' revisions are still checked;
 * - once `follow` is called (by membership, when the node is announced) the object is watched
 *   (tier-watches.ts `one`: listed once, then watched, no periodic request): a marker written or
 *   lifted by another node is `recovery()` as soon as the watch tells it, and the object deleted
 *   or its identity replaced halts the agent then, not at the next read. `following` says whether
 *   that watch is live, so a reader need not read the object to see a marker lifted;
 * - a verification whose read was out while the operator accepted the store judges nothing and
 *   creates nothing (what it knew was the old store's): it halts and records the identity only
 *   through the StoreCheck begun before its read (tiered/continuity.ts), which drops both then.
 */
import { randomUUID } from 'node:crypto';
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import { isPlainObject as isRecord } from '../../core/validate.ts';
import type { StoreCheck } from '../tiered/continuity.ts';
import { type Recovery, joined, left, recoveryOf } from '../tiered/recovery.ts';
import { API_LOST_RECOVERY, type KubeContinuity } from './continuity.ts';
import { API_VERSION } from './names.ts';
import { type KubeObject, metaOf } from './objects.ts';
import type { Resource } from './resources.ts';
import type { KubeTierWatches, OneWatched } from './tier-watches.ts';

/** The one object's name. */
export const STATE_NAME = 'store';
/** Rounds of read-and-write against an object that keeps changing, before TRY_AGAIN. */
const MAX_ROUNDS = 8;

interface StateView {
  readonly identity: string;
  readonly recovery: Recovery | undefined;
  readonly version: string;
}

function stateOf(object: unknown): StateView | undefined {
  const meta = metaOf(object);
  if (meta === undefined || !isRecord(object) || !isRecord(object.spec)) return undefined;
  const identity = object.spec.identity;
  if (typeof identity !== 'string') return undefined;
  return { identity, recovery: recoveryOf(object.spec.recovery), version: meta.resourceVersion };
}

function stateObject(identity: string, recovery: Recovery | undefined, version?: string): KubeObject {
  return {
    apiVersion: API_VERSION,
    kind: 'WarrenClusterState',
    metadata: { name: STATE_NAME, ...defined({ resourceVersion: version }) },
    spec: {
      identity,
      ...(recovery === undefined
        ? {}
        : { recovery: { since: recovery.since, reason: recovery.reason, pending: [...recovery.pending] } }),
    },
  };
}

export class KubeClusterState {
  readonly #clusterState: Resource;
  readonly #continuity: KubeContinuity;
  readonly #now: () => number;
  /** The identity recorded at the agent's last run; compared at the first verification only. */
  #expected: string | undefined;
  /** The marker as last read. */
  #recovery: Recovery | undefined;
  /** The object watched, once `follow` was called. */
  #followed: OneWatched<StateView> | undefined;

  constructor(clusterState: Resource, continuity: KubeContinuity, now: () => number, expected?: string) {
    this.#clusterState = clusterState;
    this.#continuity = continuity;
    this.#now = now;
    this.#expected = expected;
  }

  /** Watches the object from now on (idempotent): its changes are taken as they come. */
  follow(watches: KubeTierWatches): void {
    if (this.#followed !== undefined) return;
    this.#followed = watches.one(this.#clusterState, 'the store identity', STATE_NAME, stateOf);
    this.#followed.listen((change) =>
      this.#judge(change.type === 'deleted' ? undefined : change.value, this.#continuity.begin()),
    );
  }

  /** Whether the object's watch is live: `recovery()` is the marker as the API server has it now. */
  following(): boolean {
    return this.#followed?.live() ?? false;
  }

  /** Stops watching the object. */
  unfollow(): void {
    this.#followed?.close();
    this.#followed = undefined;
  }

  recovery(): Recovery | undefined {
    return this.#recovery;
  }

  async #read(): Promise<StateView | undefined> {
    const object = await this.#clusterState.get('read the store identity', STATE_NAME);
    if (object === undefined) return undefined;
    const state = stateOf(object);
    if (state === undefined)
      throw new WarrenError(
        'IO_FAILURE',
        `the WarrenClusterState ${STATE_NAME} has no identity in its spec (made by hand?): fix or delete it`,
      );
    return state;
  }

  /**
   * Reads the object: records an identity where there is none (unless one is known), halts when the
   * one known is gone or replaced, and keeps the marker it holds. Nothing is created while halted.
   */
  async verify(): Promise<void> {
    const c = this.#continuity;
    const check = c.begin();
    const known = c.identity ?? this.#expected;
    let state = await this.#read();
    // The operator accepted the store while the read was out: the check that follows the accept judges.
    if (check.outdated) return;
    if (state === undefined && known === undefined && c.halted() === undefined) {
      const created = await this.#clusterState.create(
        'record the store identity',
        stateObject(randomUUID(), undefined),
      );
      state = created.kind === 'created' ? stateOf(created.object) : await this.#read();
      if (check.outdated) return;
    }
    if (state === undefined && known === undefined && c.halted() === undefined)
      throw new WarrenError('TRY_AGAIN', 'the store identity was created and deleted at once');
    this.#judge(state, check, known);
    // Compared once: from now on what this process verified counts, or the operator's accept.
    if (c.halted() === undefined) this.#expected = undefined;
  }

  /**
   * Takes what the object is now (read, or told by its watch): keeps its marker, halts when the
   * identity `known` is gone or replaced, and records the identity when none was known; both through
   * `check`, begun before the read (or at the watch's event).
   */
  #judge(state: StateView | undefined, check: StoreCheck, known = this.#continuity.identity): void {
    const c = this.#continuity;
    this.#recovery = state?.recovery;
    if (c.halted() !== undefined) return;
    if (state === undefined) {
      if (known === undefined) return; // nothing known yet: verify decides whether to make it
      check.halt(
        'store-lost',
        `${c.where} lost its data: its WarrenClusterState ${STATE_NAME} (store identity ${known}) is gone. ` +
          API_LOST_RECOVERY,
      );
      return;
    }
    if (known !== undefined && state.identity !== known) {
      check.halt(
        'store-lost',
        `${c.where} is not the store this agent knew: its identity is ${state.identity}, not ${known} (its data ` +
          `was wiped and the identity made again, or the agent reaches another cluster). ${API_LOST_RECOVERY}`,
      );
      return;
    }
    check.verified(state.identity);
  }

  /** Adds `nodes` to the marker, writing it when there is none (and the object, on a wiped store). */
  async join(nodes: readonly string[], reason: string): Promise<void> {
    await this.#change((recovery) => joined(recovery, nodes, reason, this.#now()));
  }

  /** Takes `node` off the marker; the last one removes it. Nothing when there is none. */
  async leave(node: string): Promise<void> {
    await this.#change((recovery) => (recovery === undefined ? undefined : left(recovery, node)));
  }

  async #change(change: (recovery: Recovery | undefined) => Recovery | undefined): Promise<void> {
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const state = await this.#read();
      const next = change(state?.recovery);
      if (JSON.stringify(next) === JSON.stringify(state?.recovery)) {
        this.#recovery = next;
        return;
      }
      if (state === undefined) {
        // A wiped store: the object is made again, with a new identity, to carry the marker.
        const created = await this.#clusterState.create('write the recovery marker', stateObject(randomUUID(), next));
        if (created.kind === 'created') {
          this.#recovery = next;
          return;
        }
        continue;
      }
      const written = await this.#clusterState.replace(
        'write the recovery marker',
        stateObject(state.identity, next, state.version),
      );
      if (written.kind === 'replaced') {
        this.#recovery = next;
        return;
      }
    }
    throw new WarrenError('TRY_AGAIN', `the WarrenClusterState ${STATE_NAME} kept changing; try again`);
  }
}
