/**
 * Cluster-wide reservations (WarrenReservation, cluster-scoped, deploy/crds/warrenreservations.yaml):
 * every agent list-watches them into the allocator's ReservedAddresses (ipam/reserved.ts), and says
 * in each reservation's status which of its addresses this node still holds.
 *
 * Who writes the status: each node its own entry, `status.inUse.<node>`, by a JSON merge patch of
 * the status subresource — a merge patch merges maps key by key, so nodes never overwrite each
 * other and no write needs a resourceVersion or a leader. A node with nothing in use removes its
 * entry (null), so an empty `inUse` means the reservation holds every address back.
 *
 * Guarantees:
 * - the reservations the allocator sees are those of the last listing and the changes after it,
 *   swapped in whole (ReservedAddresses.replace); a reservation deleted frees its addresses at once;
 * - a reservation over an address in use releases nothing: the address stays with its holder, is
 *   listed in the status, and is never handed out again once released;
 * - the status is looked at once per `intervalMs`, and soon (`settleMs`) after the reservations
 *   change or this node releases a reserved address (`released`); it is written only when this
 *   node's entry differs from what the object shows (or what this agent last wrote), at most once
 *   per reservation per look: a bounded rate, and none at rest;
 * - with no reservation nothing is read or written; a look reads this node's allocations once
 *   (Store.list by node: the node's own SQLite file on the kubernetes store);
 * - a failed write is logged and tried again at the next look; a reservation deleted meanwhile
 *   (404) is not an error.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { PeriodicTask } from '../../core/periodic-task.ts';
import { isPlainObject } from '../../core/validate.ts';
import { parseIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { isBookkeeping } from '../../ipam/bookkeeping.ts';
import { type Reservation, type ReservedAddresses, malformedEntries } from '../../ipam/reserved.ts';
import type { ListWatchItem } from '../../sources/kubernetes/list-watch.ts';
import type { Store } from '../../store/store.ts';
import type { InUseAddress, NodeInUse } from '../../api/protocol.ts';

export type { InUseAddress, NodeInUse } from '../../api/protocol.ts';

/** Addresses listed per node in a status entry; `count` says how many there are in all. */
export const MAX_LISTED_IN_USE = 64;

/** A WarrenReservation as the agent keeps it: the reservation, and the status every node wrote. */
export interface ReservationObject {
  readonly reservation: Reservation;
  /** `status.inUse`, by node. */
  readonly inUse: Readonly<Record<string, NodeInUse>>;
}

export interface ClusterReservationsOptions {
  readonly reserved: ReservedAddresses;
  readonly store: Pick<Store, 'list'>;
  readonly node: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * Writes this node's entry of a reservation's status (null: removes it), 'missing' when the
   * reservation is gone (reservation-status.ts).
   */
  readonly writer: {
    write(name: string, entry: NodeInUse | null): Promise<'written' | 'missing'>;
  };
  /** Between looks at the status. Default 30 s. */
  readonly intervalMs?: number;
  /** From a change of the reservations to the look it calls for. Default 2 s. */
  readonly settleMs?: number;
}

export interface ClusterReservationsStatus {
  readonly reservations: number;
  /** Entries of `spec.addresses` that are neither addresses nor CIDRs: `name: entry`. */
  readonly malformed: readonly string[];
  /** Reserved addresses this node still holds. */
  readonly inUseHere: number;
  readonly statusWrites: number;
  readonly lastError?: string;
}

const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v !== '';

function inUseAddressOf(v: unknown): InUseAddress | undefined {
  if (!isPlainObject(v) || !nonEmpty(v.address)) return undefined;
  return {
    address: v.address,
    ...(nonEmpty(v.pod) ? { pod: v.pod } : {}),
    containerID: typeof v.containerID === 'string' ? v.containerID : '',
    network: typeof v.network === 'string' ? v.network : '',
  };
}

function nodeInUseOf(v: unknown): NodeInUse | undefined {
  if (!isPlainObject(v)) return undefined;
  const addresses = Array.isArray(v.addresses)
    ? v.addresses.map(inUseAddressOf).filter((a): a is InUseAddress => a !== undefined)
    : [];
  return { count: typeof v.count === 'number' ? v.count : addresses.length, addresses };
}

/** A WarrenReservation object as the agent keeps it; undefined without a name. */
export function reservationObjectOf(object: unknown): ReservationObject | undefined {
  if (!isPlainObject(object) || !isPlainObject(object.metadata) || !nonEmpty(object.metadata.name)) return undefined;
  const spec = isPlainObject(object.spec) ? object.spec : {};
  const addresses = Array.isArray(spec.addresses) ? spec.addresses.filter((a) => typeof a === 'string') : [];
  const reservation: Reservation = {
    name: object.metadata.name,
    addresses,
    ...(nonEmpty(spec.reason) ? { reason: spec.reason } : {}),
  };
  const status = isPlainObject(object.status) ? object.status : {};
  const inUse: Record<string, NodeInUse> = {};
  if (isPlainObject(status.inUse))
    for (const [node, entry] of Object.entries(status.inUse)) {
      const parsed = nodeInUseOf(entry);
      if (parsed !== undefined) inUse[node] = parsed;
    }
  return { reservation, inUse };
}

/** One form of an entry whatever key order it came in: what is compared before a write. */
const canonical = (entry: NodeInUse | undefined): string =>
  entry === undefined || entry.count === 0
    ? ''
    : JSON.stringify([entry.count, entry.addresses.map((a) => [a.address, a.pod ?? '', a.containerID, a.network])]);

export class ClusterReservations {
  readonly #o: ClusterReservationsOptions;
  /** The reservations by name, as last listed and changed. */
  #objects = new Map<string, ReservationObject>();
  /** What this agent last wrote for its node, by reservation: no write again before the watch shows it. */
  readonly #written = new Map<string, string>();
  readonly #task: PeriodicTask<void>;
  #settle: (() => void) | undefined;
  /** The reservations' specs as last given to the allocator: a status-only change gives nothing new. */
  #specs = '';
  #inUseHere = 0;
  #writes = 0;
  #lastError: string | undefined;

  constructor(options: ClusterReservationsOptions) {
    this.#o = options;
    this.#task = new PeriodicTask({
      clock: options.clock,
      intervalMs: options.intervalMs ?? 30_000,
      run: () => this.#look(),
      onError: (error) => this.#failed(error),
    });
  }

  /** Consumes the list-watch of WarrenReservations until `signal` aborts. */
  async run(items: AsyncIterable<ListWatchItem<unknown>>, signal: AbortSignal): Promise<void> {
    this.#task.start(signal);
    signal.addEventListener(
      'abort',
      () => {
        this.#settle?.();
        this.#settle = undefined;
      },
      { once: true },
    );
    for await (const item of items) {
      this.observe(item);
      if (signal.aborted) break;
    }
  }

  /** One item of the watch: the reservations change, and a look at the status follows soon. */
  observe(item: ListWatchItem<unknown>): void {
    if (item.kind === 'listed') {
      const objects = new Map<string, ReservationObject>();
      for (const o of item.objects) {
        const parsed = reservationObjectOf(o);
        if (parsed !== undefined) objects.set(parsed.reservation.name, parsed);
      }
      this.#objects = objects;
    } else {
      const parsed = reservationObjectOf(item.object);
      if (parsed === undefined) return;
      const name = parsed.reservation.name;
      if (item.kind === 'deleted') this.#objects.delete(name);
      else this.#objects.set(name, parsed);
      // The object shows what this agent wrote: from now on it is what a look compares with.
      if (this.#written.get(name) === canonical(parsed.inUse[this.#o.node])) this.#written.delete(name);
    }
    for (const name of [...this.#written.keys()]) if (!this.#objects.has(name)) this.#written.delete(name);
    // Only a change of what is reserved is one: the status every node writes changes nothing here.
    const specs = JSON.stringify(this.objects().map((o) => o.reservation));
    if (specs === this.#specs) return;
    this.#specs = specs;
    this.#o.reserved.replace([...this.#objects.values()].map((o) => o.reservation));
    this.#soon();
  }

  /** Addresses this node released: a reserved one is dropped from the status soon. */
  released(allocations: readonly Allocation[]): void {
    if (this.#o.reserved.empty) return;
    const reserved = (a: Allocation): boolean => {
      const ip = parseIP(a.address);
      return ip !== undefined && this.#o.reserved.has(ip);
    };
    if (allocations.some(reserved)) this.#soon();
  }

  /** The reservations and the status every node wrote, by name. */
  objects(): readonly ReservationObject[] {
    return [...this.#objects.values()].sort((a, b) => (a.reservation.name < b.reservation.name ? -1 : 1));
  }

  /** Looks at the status now (tests; the schedule does it on its own). */
  look(): Promise<void> {
    return this.#task.runNow();
  }

  status(): ClusterReservationsStatus {
    return {
      reservations: this.#objects.size,
      malformed: [...this.#objects.values()].flatMap((o) =>
        malformedEntries(o.reservation).map((e) => `${o.reservation.name}: ${e}`),
      ),
      inUseHere: this.#inUseHere,
      statusWrites: this.#writes,
      ...defined({ lastError: this.#lastError }),
    };
  }

  /** A look after `settleMs`, unless one is already due then: a burst of changes calls for one. */
  #soon(): void {
    if (this.#settle !== undefined) return;
    this.#settle = this.#o.clock.setTimer(this.#o.settleMs ?? 2_000, () => {
      this.#settle = undefined;
      this.#task.runNow().catch((error: unknown) => this.#failed(error));
    });
  }

  /** Writes this node's entry of each reservation whose status does not show it. */
  async #look(): Promise<void> {
    const { reserved, node } = this.#o;
    if (this.#objects.size === 0) {
      this.#inUseHere = 0;
      return;
    }
    const mine = new Map<string, Allocation[]>();
    let here = 0;
    for (const a of await this.#o.store.list({ node })) {
      const ip = parseIP(a.address);
      // A placeholder (a lent address) is the borrower's to report, where it is in use.
      if (ip === undefined || isBookkeeping(a) || !reserved.has(ip)) continue;
      here += 1;
      for (const r of reserved.coveringAll(ip)) mine.set(r.name, [...(mine.get(r.name) ?? []), a]);
    }
    this.#inUseHere = here;
    let failure: unknown;
    for (const [name, object] of this.#objects) {
      const held = (mine.get(name) ?? []).sort((x, y) => (x.address < y.address ? -1 : 1));
      const entry: NodeInUse = {
        count: held.length,
        addresses: held.slice(0, MAX_LISTED_IN_USE).map((a) => ({
          address: a.address,
          ...(a.podName === undefined ? {} : { pod: `${a.podNamespace ?? ''}/${a.podName}` }),
          containerID: a.containerID,
          network: a.network,
        })),
      };
      const wanted = canonical(entry);
      if (wanted === (this.#written.get(name) ?? canonical(object.inUse[node]))) continue;
      try {
        const outcome = await this.#o.writer.write(name, entry.count === 0 ? null : entry);
        this.#writes += 1;
        if (outcome === 'written') this.#written.set(name, wanted);
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
    this.#lastError = undefined;
  }

  #failed(error: unknown): void {
    this.#lastError = messageOf(error);
    this.#o.logger.warn({ err: this.#lastError }, 'reservations: the status could not be written; trying again');
  }
}
