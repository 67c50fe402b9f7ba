/**
 * Liveness of the agents sharing a cluster store, and what follows when the store is no longer the
 * one they wrote to (the contract; etcd-tier/membership.ts and kubernetes/lease-membership.ts keep it):
 * one agent per node name, chores elected once, a halt when the store lost its data or the node's
 * name was taken, and the cluster's recovery marker (recovery.ts) after such a loss.
 */

/** A node as announced by its agent; present only while the agent is alive (lease). */
export interface NodeRecord {
  readonly node: string;
  /** Milliseconds since the epoch when the agent announced itself. */
  readonly since: number;
  readonly version?: string;
  /** Which start of which agent holds the announcement (absent in records of older agents). */
  readonly instance?: string;
  readonly host?: string;
  readonly pid?: number;
  /** The kernel's boot id of the agent's machine: tells a restart on this boot from a clone's or a reboot's. */
  readonly bootId?: string;
  /** The pid namespace `pid` is in (`pid:[inode]`): another container's pid says nothing here. */
  readonly pidNamespace?: string;
}

/** What an agent announces about itself; `previous` is not published. */
export interface AnnounceInfo {
  readonly since: number;
  readonly version: string;
  /** This start of the agent (a fresh id per start). */
  readonly instance?: string;
  readonly host?: string;
  readonly pid?: number;
  readonly bootId?: string;
  readonly pidNamespace?: string;
  /**
   * The instance this agent's state directory recorded at its last start. An announcement held by
   * it is this agent's own, left by a process that died (kill -9) while its lease runs on: taken
   * over at once when made on this boot, waited out (up to the lease) when not, since a machine
   * cloned with its state directory would otherwise take a live agent's name.
   */
  readonly previous?: string;
}

/** What `Membership.accept` wrote back into the store (etcd: the node's claims, etcd-tier/tiered.ts). */
export interface AcceptReport {
  /** Addresses written back. */
  readonly addresses: number;
  /** Blocks claimed again for this node. */
  readonly blocks: number;
  /** What could not be written back, and why: for the operator to resolve. */
  readonly conflicts: readonly string[];
}

/** Liveness of agents, for stores shared by several nodes. */
/** The cluster's recovery marker as read from the store (tiered/recovery.ts keeps its bookkeeping). */
export interface Recovery {
  /** When the first node wrote it, ms since the epoch. */
  readonly since: number;
  /** What the first node noticed. */
  readonly reason: string;
  /** Nodes that must accept the store, or be forgotten, before any node allocates again; sorted. */
  readonly pending: readonly string[];
}

/** What the asker of `Membership.alive` knows of the node. */
export interface AliveQuestion {
  /** Kubernetes deleted its Node, or an operator named it to forget. */
  readonly toldGone?: boolean;
}

export interface Membership {
  /**
   * Announces `node` as alive for as long as this process keeps its lease. Refuses
   * (ALREADY_RUNNING, naming it) while another instance's announcement of `node` is alive.
   */
  announce(node: string, info: AnnounceInfo): Promise<void>;
  /**
   * Why this agent must not write to the store: the store lost its data (it went backwards, or its
   * identity is gone), or another instance took this node's announcement. Undefined while it may.
   * Sticky until `accept`.
   */
  halted(): string | undefined;
  /**
   * The operator's word after a halt: the store as it is now is the one to use. Forgets what was
   * seen of the old store, adopts the present one (recording an identity in an empty one), writes
   * back what this agent still knows it held (never over what the store holds now), announces
   * again, and takes this node off the recovery marker.
   */
  accept(): Promise<AcceptReport>;
  /** The identity of the store as verified at the last announcement; undefined before. */
  identity(): string | undefined;
  /**
   * The cluster's recovery marker as last read (recovery.ts): while it stands no node allocates,
   * this one included, until every node it lists has accepted the store or been forgotten.
   */
  recovery(): Recovery | undefined;
  /**
   * Reads the recovery marker (and checks the store's identity where it is kept with it), and when
   * this node halted because the store lost its data, adds this node to it with the nodes the store
   * names as holding blocks (writing it if there is none); `taken`, why a range of this node is
   * halted on a block another node holds: adds this node to a marker that stands (recovery.ts
   * `RecoveryJoin`). Run by the upkeep before it announces.
   */
  keepRecovery(taken?: string): Promise<void>;
  /** Takes a forgotten node off the recovery marker (`warren node forget`); accept does so for its own. */
  leaveRecovery(node: string): Promise<void>;
  /**
   * Nodes whose agent may be alive: etcd, those whose lease runs; Kubernetes, those announced and
   * not found gone (an idle agent does not renew its Lease: kubernetes/lease-ping.ts). What must not
   * free a live node's things reads this; what frees them asks `alive`.
   */
  liveNodes(): Promise<NodeRecord[]>;
  /**
   * Whether `node`'s agent is alive, asked now: etcd, its lease runs; Kubernetes, its Lease runs
   * or it answers a ping within the ping time (a wait of up to that long), and one that does not is
   * marked gone. False for a node not announced. `toldGone`: the caller was told the node is gone
   * (its Node deleted, an operator's forget), so on Kubernetes a running Lease is pinged too (it
   * tells of a renewal in the past); etcd's lease is kept alive by the agent itself, and says now.
   */
  alive(node: string, told?: AliveQuestion): Promise<boolean>;
  /**
   * Checks the store is still the one announced to and the announcement still this instance's
   * (halting when not), and announces again if it was lost (the store was away longer than its lease).
   */
  renew(): Promise<void>;
  /** Withdraws the announcement at once (clean stop). */
  withdraw(): Promise<void>;
  /**
   * Elects this node for a one-off cluster chore (`task`, e.g. `forget-node/n3`): true for exactly
   * one of the nodes that ask while the winner lives. The claim lives as long as the winner's
   * announcement, so a winner that dies leaves the chore to whoever asks next. Asking again for a
   * chore this node already holds answers true (a winner whose chore failed halfway takes it up
   * again). False before `announce`.
   */
  claimTask(task: string): Promise<boolean>;
  /** Gives a chore up so it can be claimed again (the forgotten node came back). */
  releaseTask(task: string): Promise<void>;
}

/** The other instance, as its announcement records it, for a refusal or a halt. */
export function describeInstance(record: NodeRecord | undefined): string {
  if (record?.instance === undefined)
    return 'an agent that records no instance (an older version, or a key Warren did not write)';
  const where = [
    record.host === undefined ? undefined : `host ${record.host}`,
    record.pid === undefined ? undefined : `pid ${record.pid}`,
  ].filter((x) => x !== undefined);
  return (
    `agent instance ${record.instance} ` + `(${[...where, `since ${new Date(record.since).toISOString()}`].join(', ')})`
  );
}

/**
 * Whether `holder`, another instance's announcement of this node, was made on this machine and boot
 * (its host and boot id are `self`'s) by a process that no longer runs: that agent is gone, and its
 * announcement may be taken over at once like this agent's own previous start. It names no instance
 * this state directory recorded when the directory was put back from a copy older than the last
 * start (docs/recovery.md, "A node's disk restored"). A pid that runs (reused, or another agent's),
 * or one recorded in another pid namespace (or by an agent that recorded none), keeps it refused.
 */
export function goneFromThisBoot(holder: NodeRecord | undefined, self: NodeRecord): boolean {
  if (holder?.bootId === undefined || holder.bootId !== self.bootId || holder.host !== self.host) return false;
  // A pid is looked up only in the namespace it was recorded in: an agent in another container
  // (a DaemonSet's old pod while its new one starts) runs whatever this namespace says.
  if (holder.pidNamespace === undefined || holder.pidNamespace !== self.pidNamespace) return false;
  if (holder.pid === undefined || holder.pid === self.pid) return false;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
