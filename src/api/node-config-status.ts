/**
 * The node's side of the agent's status (part of the wire contract, protocol.ts; gathered into
 * AgentStatus by status.ts): the CNI config manager, the networks taken over from host-local and
 * handed back, and what `warren uninstall` did. The stability rule of protocol.ts holds here too.
 */
/**
 * The CNI config manager. `current`: Warren's file is derived from the primary as it is now;
 * `stale`: it is not (the primary is gone, broken or cannot be taken over: `problem` says which),
 * the last good file stays; `waiting`: no primary yet, within --primary-wait; `not-ready`: the
 * readiness indicator is missing and Warren's file is removed; `failed`: the write itself failed,
 * or a pass threw (`problem` says which); the last file stays and the next change retries.
 */
export interface CniConfigStatus {
  /**
   * handed-back: `warren uninstall` gave the node back to the primary's IPAM; nothing is written.
   * beside-multus: the primary is Multus', which attaches each network from its own config (Warren's
   * in NetworkAttachmentDefinitions); nothing is written, and nothing is wrong.
   */
  readonly state: 'waiting' | 'current' | 'stale' | 'not-ready' | 'failed' | 'handed-back' | 'beside-multus';
  readonly confDir: string;
  /** Warren's file. */
  readonly output: string;
  readonly cniVersionMax: string;
  /** The primary's path, when there is one. */
  readonly primary?: string;
  /** The network name, kept from the primary. */
  readonly network?: string;
  readonly problem?: string;
  /** What was dropped from the primary's IPAM on the way, each with why. */
  readonly notes?: readonly string[];
  /** A config that sorts before Warren's: the runtime uses it, not Warren's. */
  readonly shadowedBy?: string;
  /** The last time this agent wrote its file: when (ISO 8601), from which primary, its digest. */
  readonly lastWrite?: { readonly at: string; readonly from: string; readonly sha256: string };
  readonly writes: number;
  readonly readinessIndicator?: { readonly path: string; readonly present: boolean };
  /** Ranges taken over from host-local: whether their reservations are imported, and what was skipped. */
  readonly takeover?: readonly TakeoverStatus[];
}

/** One network taken over from host-local (agent/node/host-local-takeover.ts). */
export interface TakeoverStatus {
  readonly network: string;
  /** host-local's data dir for the network. */
  readonly dataDir: string;
  /** Its reservations were imported once: ADD of the network is served. */
  readonly imported: boolean;
  /** Files skipped and conflicts of the last import, each naming the file. */
  readonly problems?: readonly string[];
  readonly handedBack?: true;
}

/** What handing one network back to host-local did. */
export interface HandBackReport {
  readonly network: string;
  readonly dataDir: string;
  /** Reservation files written for addresses Warren holds. */
  readonly written: number;
  /** Reservation files that already said what Warren holds. */
  readonly kept: number;
  /** Files of addresses in Warren's ranges that Warren no longer holds. */
  readonly removed: number;
  readonly problems: readonly string[];
}

/** What `warren uninstall` asked of the agent did (POST /v1/uninstall). */
export interface UninstallReport {
  /** When the node was handed back (ISO 8601); the same on a repeated call. */
  readonly at: string;
  readonly networks: readonly HandBackReport[];
  /** Warren's config was removed from the conf dir (false: there was none of Warren's). */
  readonly configRemoved: boolean;
  /** Warren's own config file, when the agent manages one (absent: --manage-cni-config off). */
  readonly output?: string;
  /**
   * Addresses pods on this node still hold through Warren (bookkeeping records aside). Without a
   * config of the agent's own, the configs naming Warren stay, so these pods' DELs still call the
   * plugin: `warren uninstall` keeps it until none is left.
   */
  readonly held: number;
  /** Where the agent keeps the mark that it handed the node back (survives restarts). */
  readonly marker: string;
}
