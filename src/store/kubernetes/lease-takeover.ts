/**
 * What an agent does about its node's announcement (lease-membership.ts) found held by another at
 * announce (`Takeover`: take it, wait, ping its holder, or refuse; its rules are on the class), and
 * in particular about one held by its own previous start made on another boot (a crash or a power
 * loss left it; a clean stop deletes it): that holder is either gone with the boot it ran on (a
 * reboot) or alive on a machine cloned with this one's state directory, and only Kubernetes can
 * tell which.
 *
 * - `holderRebooted`: one GET of the Node named as this node (core/v1, `/api/v1/nodes/<name>`): its
 *   `status.nodeInfo.bootID` is the boot the kubelet registered under that name reports. Equal to
 *   this agent's own boot ID, the machine registered as this node has booted since the holder
 *   started (the holder recorded another boot), so the holder cannot be alive on it: the caller takes
 *   the Lease over at once. Anything else — another boot ID (a clone's kubelet, or a kubelet that
 *   has not reported this boot yet), no Node, no bootID, no right to read Nodes, no answer — says
 *   nothing, and the caller waits. A clone whose kubelet registered under the same name and last
 *   reported this machine's boot is taken over, then halts at once on its Lease's watch (taken over:
 *   it stops allocating) rather than fighting over it.
 * - `waitOut`: the wait, a read of the Lease every 250 ms of the clock, until it lapses or changes,
 *   at most the lease time and 2 s; a lapsed one is then pinged (lease-ping.ts), as any lapsed Lease.
 * - `takenOverMessage`: what a node's agent says when its Lease was taken by another instance, or
 *   vacated by a node that pinged it and had no answer (lease-ping.ts).
 */
import type { Clock } from '../../core/clock.ts';
import { isPlainObject as isRecord } from '../../core/validate.ts';
import { describeInstance, goneFromThisBoot } from '../membership.ts';
import type { NodeRecord } from '../store.ts';
import { type LeaseView, leaseOf, recordOf } from './lease-objects.ts';
import { type PingOptions, pingAnnouncement } from './lease-ping.ts';
import type { Resource } from './resources.ts';

/** How often a Lease being waited out is read again. */
const WAIT_STEP_MS = 250;

/** The boot ID the Node object reports (`status.nodeInfo.bootID`); undefined when it says none. */
export function bootIdOfNode(object: unknown): string | undefined {
  if (!isRecord(object) || !isRecord(object.status) || !isRecord(object.status.nodeInfo)) return undefined;
  const id = object.status.nodeInfo.bootID;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/**
 * Whether Kubernetes' Node `node` reports `bootId`, this agent's boot, so that `holder` (a start on
 * another boot) is gone: false when it cannot tell. Says so when it is.
 */
export async function holderRebooted(
  o: { readonly nodes?: Resource | undefined; readonly notice?: ((message: string) => void) | undefined },
  node: string,
  bootId: string | undefined,
  holder: NodeRecord | undefined,
): Promise<boolean> {
  if (o.nodes === undefined || bootId === undefined) return false;
  let reported: string | undefined;
  try {
    reported = bootIdOfNode(await o.nodes.get(`read the boot of node ${node}`, node));
  } catch {
    return false; // no right to read Nodes, or no answer: the wait decides, as without Kubernetes' word
  }
  if (reported !== bootId) return false;
  o.notice?.(
    `this node's announcement is held by ${describeInstance(holder)}, this agent's previous start on another ` +
      `boot; Kubernetes' Node ${node} reports this machine's boot (${bootId}), so that start is gone: taking ` +
      `the announcement over`,
  );
  return true;
}

export interface WaitOutOptions {
  readonly leases: Resource;
  readonly leaseSeconds: number;
  readonly clock: Clock;
  readonly notice?: ((message: string) => void) | undefined;
}

/** This agent's previous start on another boot holds the Lease: wait until it lapses or changes. */
export async function waitOut(
  o: WaitOutOptions,
  name: string,
  lease: LeaseView,
  holder: NodeRecord | undefined,
): Promise<void> {
  const boundMs = o.leaseSeconds * 1000 + 2000;
  o.notice?.(
    `this node's announcement is held by ${describeInstance(holder)}, this agent's previous start on another ` +
      `boot (a reboot, or a machine cloned with this state directory): waiting up to ` +
      `${Math.ceil(boundMs / 1000)} s for its lease to lapse`,
  );
  const start = o.clock.monotonic();
  while (o.clock.monotonic() - start < boundMs) {
    const now = leaseOf(await o.leases.get('read the node announcement', name));
    if (now === undefined || now.version !== lease.version || now.expires <= o.clock.now()) return;
    await new Promise<void>((resolve) => o.clock.setTimer(WAIT_STEP_MS, resolve));
  }
}

/**
 * Why this agent halted: its node's Lease `name` is held by `holder`, another instance, or by
 * nobody (`vacated`: another node pinged this agent, had no answer in time, and counted it gone).
 */
export function takenOverMessage(node: string, name: string, holder: NodeRecord | undefined, vacated = false): string {
  if (vacated)
    return (
      `this node's announcement (node ${node}, Lease ${name}) was found gone by another node: this agent did ` +
      `not answer its ping in time (cut off from the API server?), so its blocks may have been freed; it ` +
      `stopped allocating (check this node's agent and its reach to the API server, then run ` +
      `\`warren store accept\`)`
    );
  return (
    `this node's announcement (node ${node}, Lease ${name}) was taken over by ` +
    `${describeInstance(holder)}: two agents share this node name, and this one stopped allocating ` +
    `rather than fight over it (stop one of them, give it another --node-name, then run ` +
    `\`warren store accept\` on the one that stays)`
  );
}

/** What to do with a node announcement found held at announce (`Takeover.judge`). */
export type Judged =
  | { readonly kind: 'take'; readonly over: LeaseView; readonly notice?: string }
  | { readonly kind: 'again' }
  | { readonly kind: 'refuse'; readonly refusal: string };

/** The start of an agent announcing its node, as the takeover rules need it. */
export interface Claimant {
  readonly node: string;
  readonly instance: string;
  readonly previous?: string;
  readonly record: NodeRecord;
}

export interface TakeoverOptions extends PingOptions {
  readonly leaseSeconds: number;
  readonly nodes?: Resource | undefined;
  readonly notice?: ((message: string) => void) | undefined;
}

/**
 * One announcement's rounds against a Lease another holds (lease-membership.ts `#claim`): taken
 * over when it is this instance's own, its previous start's on this boot, any start's made on this
 * machine and boot whose process is gone (membership.ts `goneFromThisBoot`), held by nobody
 * (vacated), or its previous start's on another boot the Node says is over; that previous start's otherwise
 * waited out while its lease runs (once); a lapsed one of any other holder, or one renewed later than
 * this node's clock says it is (a clock stepped back), is pinged, and taken over (guarded by the
 * ping's reading) when unanswered; anything else is refused. An announcement made late (`late`:
 * the API server was away when the agent started, so it announces from its renewals while it runs)
 * pings a running one too: its refusal would stop a running agent until an operator accepts, where
 * a start's only ends that start (found by the soak: a start with its state directory put back, the
 * API server away, then a Lease its killed predecessor had renewed a second before).
 */
export class Takeover {
  readonly #o: TakeoverOptions;
  readonly #a: Claimant;
  #waited = false;
  /** Kubernetes' Node says this machine booted since the previous start that holds the Lease. */
  #rebooted = false;

  readonly #late: boolean;

  constructor(options: TakeoverOptions, claimant: Claimant, late = false) {
    this.#o = options;
    this.#a = claimant;
    this.#late = late;
  }

  async judge(lease: LeaseView): Promise<Judged> {
    const a = this.#a;
    const holder = recordOf(lease);
    const previous = a.previous !== undefined && lease.holder === a.previous;
    const sameBoot = previous && holder?.bootId !== undefined && holder.bootId === a.record.bootId;
    const now = this.#o.clock.now();
    const expired = lease.expires <= now;
    // Renewed later than this node's clock says it is now: the clock stepped back since (or the
    // renewer's runs ahead), so it cannot tell whether the lease still runs (found by the soak: an
    // agent whose node's clock went back a day could not start for a day). Asked, as a lapsed one.
    const unknowable = lease.renewed > now;
    // Held by nobody: vacated by a node that found its holder gone (lease-ping.ts).
    if (lease.holder === a.instance || sameBoot || lease.holder === undefined || (previous && this.#rebooted))
      return { kind: 'take', over: lease };
    // Made on this machine and boot by a process that no longer runs: a state directory put back
    // from an older copy records an older start, so the Lease's holder is not `previous`. Waited
    // out and pinged before (the soak: 4 s a start; on the defaults, a crash loop up to the 300 s
    // lease), as the etcd store never did.
    if (goneFromThisBoot(holder, a.record)) {
      const notice =
        `node ${a.node}'s announcement was held by ${describeInstance(holder)}, made on this machine and boot ` +
        `by a process that no longer runs (a state directory put back from an older copy?): taking it over`;
      return { kind: 'take', over: lease, notice };
    }
    if (previous && !this.#waited) {
      this.#waited = true;
      this.#rebooted = await holderRebooted(this.#o, a.node, a.record.bootId, holder);
      if (!this.#rebooted && !expired) await waitOut(this.#o, lease.name, lease, holder);
      return { kind: 'again' };
    }
    const pingSeconds = this.#o.pingMs / 1000;
    const asks = expired || unknowable || this.#late;
    if (asks) {
      // Lapsed proves nothing (an idle agent does not renew): its agent is asked.
      const asked = await pingAnnouncement(this.#o, lease.name, lease.holder, `${a.node}/${a.instance}`);
      if (asked.kind === 'changed') return { kind: 'again' };
      if (asked.kind === 'unanswered') {
        const notice =
          `node ${a.node}'s announcement was held by ${describeInstance(holder)}, which did not answer a ping ` +
          `within ${pingSeconds} s: taking it over`;
        return { kind: 'take', over: asked.lease, notice };
      }
    }
    const refusal =
      `node ${a.node} is already announced in the Kubernetes API (Lease ${lease.name}) by ` +
      `${describeInstance(holder)}, ` +
      `${asks ? 'which answered a ping' : 'which renewed it within its lease'}: ` +
      'two agents must not share a ' +
      `node name (give this one another --node-name; if that agent is gone, its name is taken over once it ` +
      `does not answer a ping within ${pingSeconds} s)`;
    return { kind: 'refuse', refusal };
  }
}
