/**
 * Releases driven by containerd's own lifecycle events, through a per-container ordered retry
 * queue (a failure for one container backs that container off and never delays another).
 *
 * The rule (an address may be reused only once nothing can still be using it):
 * - a container delete (the container record is gone) releases everything the container holds;
 * - a task exit or task delete does not release by itself: the interface in the namespace
 *   recorded at ADD may still carry the address, and handing it to a new container would put two
 *   hosts on one address. It marks the container as exited; its addresses are released as soon as
 *   that namespace is provably gone (checked at once, when a watched netns directory loses an
 *   entry, and on every reconcile tick) or the container is deleted;
 * - after (re)subscribing, allocations of this node whose container no longer exists are released,
 *   except those younger than the grace period (an ADD may still be in flight for a container
 *   being created).
 * Only this node's allocations are ever touched. Events for containers that hold no address stop
 * at one store look-up.
 */
import type { Logger } from 'pino';
import type { BackoffPolicy } from '../core/backoff.ts';
import type { Clock } from '../core/clock.ts';
import { OrderedRetryQueue, type KeyState } from '../core/ordered-retry-queue.ts';
import type { Allocation } from '../ipam/allocation.ts';
import type { ContainerEvent } from '../sources/containerd/client.ts';
import type { NetnsObserver } from '../sources/netns.ts';
import type { Allocator } from '../store/allocator.ts';
import type { Store } from '../store/store.ts';

type Work =
  | ContainerEvent
  | { readonly kind: 'netns-check'; readonly containerID: string }
  | { readonly kind: 'gone-at-resync'; readonly containerID: string };

export interface ContainerReleasesStatus {
  readonly released: number;
  /** Containers whose task exited and whose namespace still exists (or cannot be observed). */
  readonly exited: ReadonlyArray<{ readonly containerID: string; readonly since: string; readonly waitingFor: string }>;
  /** Containers with events waiting or backing off. */
  readonly queue: readonly KeyState[];
}

export interface ContainerReleasesOptions {
  readonly allocator: Allocator;
  readonly store: Store;
  readonly observer: NetnsObserver;
  readonly clock: Clock;
  readonly backoff: BackoffPolicy;
  readonly logger: Logger;
  readonly node: string;
  /** Allocations younger than this are never released by a resynchronisation. */
  readonly resyncGraceMs: number;
}

export class ContainerReleases {
  readonly #o: ContainerReleasesOptions;
  readonly #queue: OrderedRetryQueue<Work>;
  readonly #exited = new Map<string, { since: number; waitingFor: string }>();
  #released = 0;

  constructor(options: ContainerReleasesOptions) {
    this.#o = options;
    this.#queue = new OrderedRetryQueue<Work>({
      clock: options.clock,
      backoff: options.backoff,
      handle: (_key, work) => this.#handle(work),
      onFailure: (key, work, error, retryInMs) => options.logger.warn({ containerID: key, event: work.kind, err: error, retryInMs }, 'container event failed; will retry in order'),
    });
  }

  /** Queues a containerd event for its container. */
  onEvent(event: ContainerEvent): void {
    this.#queue.push(event.containerID, event);
  }

  /** After a (re)subscription: containers gone while nobody listened are released (after grace). */
  async resync(live: ReadonlySet<string>): Promise<void> {
    const cutoff = this.#o.clock.now() - this.#o.resyncGraceMs;
    const gone = new Set<string>();
    for (const a of await this.#o.store.list({ node: this.#o.node })) {
      if (!live.has(a.containerID) && a.createdAt <= cutoff) gone.add(a.containerID);
    }
    for (const containerID of gone) this.#queue.push(containerID, { kind: 'gone-at-resync', containerID });
  }

  /** Looks again at every exited container's namespace (reconcile tick, netns directory change). */
  checkExited(): void {
    for (const containerID of this.#exited.keys()) this.#queue.push(containerID, { kind: 'netns-check', containerID });
  }

  get hasExited(): boolean {
    return this.#exited.size > 0;
  }

  /** Resolves when no container has work queued. */
  idle(): Promise<void> {
    return this.#queue.idle();
  }

  stop(): void {
    this.#queue.stop();
  }

  async #handle(work: Work): Promise<void> {
    const id = work.containerID;
    const held = await this.#o.store.list({ containerID: id, node: this.#o.node });
    if (held.length === 0) {
      this.#exited.delete(id);
      return;
    }
    switch (work.kind) {
      case 'container-delete':
      case 'gone-at-resync':
        await this.#release(id, held, work.kind === 'container-delete' ? 'container deleted' : 'container gone when containerd was resynchronised');
        this.#exited.delete(id);
        return;
      case 'task-exit':
      case 'task-delete':
      case 'netns-check': {
        if (work.kind === 'netns-check' && !this.#exited.has(id)) return;
        const gone = held.filter((a) => a.netns !== undefined && this.#o.observer.observe(a.netns).kind === 'gone');
        if (gone.length > 0) await this.#release(id, gone, 'task exited and its network namespace is gone');
        const left = held.filter((a) => !gone.includes(a));
        if (left.length === 0) {
          this.#exited.delete(id);
          return;
        }
        if (!this.#exited.has(id)) {
          const waitingFor = [...new Set(left.map((a) => a.netns ?? '(no namespace recorded)'))].join(', ');
          this.#exited.set(id, { since: this.#o.clock.now(), waitingFor });
          this.#o.logger.info({ containerID: id, waitingFor }, 'task exited; addresses kept until its network namespace is gone or the container is deleted');
        }
        return;
      }
      default: {
        const never: never = work;
        throw new Error(`unhandled container work ${JSON.stringify(never)}`);
      }
    }
  }

  async #release(containerID: string, allocations: readonly Allocation[], why: string): Promise<void> {
    const released: Allocation[] = [];
    const owners = new Map<string, { network: string; containerID: string; ifname: string }>();
    for (const a of allocations) owners.set(JSON.stringify([a.network, a.ifname]), { network: a.network, containerID, ifname: a.ifname });
    for (const owner of owners.values()) released.push(...(await this.#o.allocator.release(owner)));
    this.#released += released.length;
    if (released.length > 0) this.#o.logger.info({ containerID, addresses: released.map((a) => a.address), why }, 'released');
  }

  status(): ContainerReleasesStatus {
    return {
      released: this.#released,
      exited: [...this.#exited].map(([containerID, e]) => ({ containerID, since: new Date(e.since).toISOString(), waitingFor: e.waitingFor })),
      queue: this.#queue.keys(),
    };
  }
}
