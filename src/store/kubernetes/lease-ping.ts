/**
 * Liveness on demand: whether the agent holding a node announcement (lease-membership.ts) is alive,
 * asked of it through its own Lease when it matters, instead of every agent renewing its Lease to
 * say so all the time. A Lease past its renewTime + leaseDurationSeconds proves nothing (an idle
 * agent holding no chore does not renew it); an unanswered ping does.
 *
 * - `pingAnnouncement` (the asker): reads the Lease, writes the annotation `warren.dev/ping:
 *   <asker>/<id>` on it by an RV-guarded PUT (spec untouched), then reads it every second of the
 *   clock until it carries `warren.dev/pong: <id>` or a later renewTime ('answered'), is deleted or
 *   held by another instance ('changed'), or `deadlineMs` of the clock passed ('unanswered', with
 *   the Lease as last read: a takeover guarded by its resourceVersion fails if the answer came after
 *   all). A Lease that keeps changing under the ping (three conflicts) is taken as answered: something
 *   keeps writing it. Costs one write and a GET per second of the wait, made only where a node's
 *   death would free something (a second agent of its name, a node deleted from Kubernetes, an
 *   operator's `warren node forget`).
 * - `nodeAlive`: the question as a node that would free another's things asks it; `announcedNodes`,
 *   the nodes not found gone, for what only spares them.
 * - `PingAnswers` (the holder, told each version of its own Lease its watch sees): answers each ping
 *   id once, at most one answer per 5 s (a third of the ping time if shorter; pings meanwhile are
 *   coalesced into the last one),
 *   so a pinger that writes in a loop makes the holder write at most once an interval. An answer is
 *   the holder's renewal with the pong: it also proves the API server still takes its writes.
 */
import { randomUUID } from 'node:crypto';
import type { CancelTimer, Clock } from '../../core/clock.ts';
import type { NodeRecord } from '../store.ts';
import {
  type LeaseView,
  PING_ANNOTATION,
  PONG_ANNOTATION,
  leaseOf,
  pingedObject,
  recordOf,
  vacatedObject,
} from './lease-objects.ts';
import { LEASE_LABEL, nodeLeaseName, selectorOf } from './names.ts';
import type { Resource } from './resources.ts';

/** How long a node's agent has to answer a ping, by default. */
export const DEFAULT_PING_SECONDS = 30;
/** At most one answer per this long (or a third of the ping time, if shorter). */
const ANSWER_INTERVAL_MS = 5000;
/** How often the asker reads the Lease while it waits for the answer. */
const READ_STEP_MS = 1000;
/** Writes of the ping that met a Lease changed since it was read, before it counts as answered. */
const MAX_CONFLICTS = 3;
/** How many answered ping ids the holder remembers (a pinger repeating an old one is not answered twice). */
const REMEMBERED = 16;

export type PingOutcome =
  | { readonly kind: 'answered' }
  | { readonly kind: 'unanswered'; readonly lease: LeaseView; readonly object: unknown }
  | { readonly kind: 'changed'; readonly lease: LeaseView | undefined };

export interface PingOptions {
  readonly leases: Resource;
  readonly clock: Clock;
  /** How long the holder has to answer. */
  readonly pingMs: number;
}

/** Asks the holder of the Lease `name`, as `holder` (its instance) holds it, whether it is alive. */
export async function pingAnnouncement(
  o: PingOptions,
  name: string,
  holder: string,
  asker: string,
): Promise<PingOutcome> {
  let first: LeaseView | undefined;
  for (let round = 1; round <= MAX_CONFLICTS; round++) {
    const object = await o.leases.get('read a node announcement to ping it', name);
    const lease = leaseOf(object);
    if (lease === undefined || lease.holder !== holder) return { kind: 'changed', lease };
    first ??= lease;
    if (lease.expires > first.expires) return { kind: 'answered' }; // renewed since first read
    const id = `${asker}/${randomUUID()}`;
    const body = pingedObject(object, id);
    if (body === undefined) return { kind: 'changed', lease: undefined };
    const written = await o.leases.replace('ping a node announcement', body);
    if (written.kind === 'missing') return { kind: 'changed', lease: undefined };
    if (written.kind === 'conflict') continue;
    const pinged = leaseOf(written.object);
    if (pinged === undefined) return { kind: 'changed', lease: undefined };
    return awaitAnswer(o, name, { lease: pinged, object: written.object }, id);
  }
  return { kind: 'answered' };
}

/**
 * The nodes announced and not found gone (a Lease held, lapsed or not: neither withdrawn nor
 * vacated), by node name: the ones whose things nothing may free without asking (`nodeAlive`).
 */
export async function announcedNodes(leases: Resource): Promise<NodeRecord[]> {
  const out: NodeRecord[] = [];
  for (const item of await leases.listAll('list live nodes', selectorOf({ [LEASE_LABEL]: 'node' }))) {
    const lease = leaseOf(item);
    const record = recordOf(lease);
    if (lease?.holder !== undefined && record !== undefined) out.push(record);
  }
  return out.sort((x, y) => (x.node < y.node ? -1 : x.node > y.node ? 1 : 0));
}

/**
 * How far in the future a Lease's renewal may read and still count as renewed (clocks a little apart).
 * One further ahead is pinged: a dead holder whose clock ran an hour ahead would read alive that hour.
 */
const FUTURE_SKEW_MS = 10_000;

/**
 * Whether the agent announcing `node` is alive, as `asker` finds out: no Lease, or one vacated,
 * says gone; one whose lease runs says alive (its holder renewed it lately, not in the future) unless `evenIfRenewed`;
 * a lapsed one (or any held one, with `evenIfRenewed`) is pinged, and vacated (holder cleared,
 * RV-guarded by the ping's last reading) when unanswered, so that the
 * next asker knows without waiting and no agent of that node keeps it (its own watch sees the
 * Lease held by nobody: it stops allocating, as taken over).
 *
 * `evenIfRenewed` is for a caller told the node is gone (its Node deleted, an operator's `warren
 * node forget`): a renewal tells of the past, the node may have died since, and its running Lease
 * would keep it for up to --node-lease (300 s). The ping is the proof either way.
 */
export async function nodeAlive(o: PingOptions, node: string, asker: string, evenIfRenewed = false): Promise<boolean> {
  const name = nodeLeaseName(node);
  const lease = leaseOf(await o.leases.get('read a node announcement', name));
  if (lease?.holder === undefined) return false;
  // A renewal written in the future (its holder's clock ahead of this node's) proves nothing of now: pinged.
  const now = o.clock.now();
  if (!evenIfRenewed && lease.expires > now && lease.renewed <= now + FUTURE_SKEW_MS) return true;
  const asked = await pingAnnouncement(o, name, lease.holder, asker);
  switch (asked.kind) {
    case 'answered':
      return true;
    case 'changed':
      return asked.lease?.holder !== undefined; // announced again by another start: alive
    case 'unanswered': {
      const vacated = vacatedObject(asked.object);
      if (vacated === undefined) return false;
      const written = await o.leases.replace('vacate the announcement of a gone node', vacated);
      return written.kind === 'conflict'; // changed at the last moment (an answer): alive, asked again later
    }
    default: {
      const never: never = asked;
      throw new Error(`unhandled ping outcome ${JSON.stringify(never)}`);
    }
  }
}

async function awaitAnswer(
  o: PingOptions,
  name: string,
  pinged: { readonly lease: LeaseView; readonly object: unknown },
  id: string,
): Promise<PingOutcome> {
  const start = o.clock.monotonic();
  let last = pinged;
  while (o.clock.monotonic() - start < o.pingMs) {
    await new Promise<void>((resolve) => o.clock.setTimer(READ_STEP_MS, resolve));
    const object = await o.leases.get('read a pinged node announcement', name);
    const lease = leaseOf(object);
    if (lease === undefined || lease.holder !== pinged.lease.holder) return { kind: 'changed', lease };
    if (lease.annotations[PONG_ANNOTATION] === id || lease.expires > pinged.lease.expires) return { kind: 'answered' };
    last = { lease, object };
  }
  return { kind: 'unanswered', ...last };
}

/** The holder's side: which pings to answer, and when. */
export class PingAnswers {
  readonly #clock: Clock;
  readonly #intervalMs: number;
  /** Writes the answer to ping `id`; true once written. */
  readonly #answer: (id: string) => Promise<boolean>;
  /** The last ids answered: a ping is answered once. */
  readonly #answered: string[] = [];
  /** The ping to answer next (the latest seen). */
  #pending: string | undefined;
  /** When the last answer was written (monotonic): the next waits the interval out. */
  #lastAt = Number.NEGATIVE_INFINITY;
  #timer: CancelTimer | undefined;
  #writing = false;

  /** Answers pings that give `pingMs` to answer, by `answer`. */
  constructor(clock: Clock, pingMs: number, answer: (id: string) => Promise<boolean>) {
    this.#clock = clock;
    this.#intervalMs = Math.min(ANSWER_INTERVAL_MS, pingMs / 3);
    this.#answer = answer;
  }

  /** Told each version of the holder's own Lease: answers a ping it carries that was not answered. */
  seen(lease: LeaseView): void {
    const id = lease.annotations[PING_ANNOTATION];
    if (id === undefined || id === lease.annotations[PONG_ANNOTATION] || this.#answered.includes(id)) return;
    this.#pending = id;
    this.#schedule();
  }

  close(): void {
    this.#timer?.();
    this.#timer = undefined;
    this.#pending = undefined;
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#writing || this.#pending === undefined) return;
    const wait = this.#lastAt + this.#intervalMs - this.#clock.monotonic();
    if (wait <= 0) {
      void this.#write();
      return;
    }
    this.#timer = this.#clock.setTimer(wait, () => {
      this.#timer = undefined;
      void this.#write();
    });
  }

  async #write(): Promise<void> {
    const id = this.#pending;
    this.#pending = undefined;
    if (id === undefined) return;
    this.#writing = true;
    this.#lastAt = this.#clock.monotonic();
    try {
      if (await this.#answer(id)) {
        this.#answered.push(id);
        if (this.#answered.length > REMEMBERED) this.#answered.shift();
      }
    } catch {
      // Not answered (the API server away): the asker counts it so; a later ping is answered.
    } finally {
      this.#writing = false;
      this.#schedule();
    }
  }
}
