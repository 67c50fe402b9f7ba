/**
 * The agent's wire contract: what the plugin and the CLI send the agent and what it answers, as
 * JSON over HTTP on its unix socket (routes.ts says which route carries which). The agent's code
 * produces these shapes and the clients read them; neither side defines them for the other.
 *
 * Stability: a field once answered keeps its name and meaning (scripts read `--json` output);
 * fields may be added. Every failure outside a CNI call is an `ErrorAnswer` with a Warren error
 * code (errors.ts maps each code to its one HTTP status). A CNI call whose body could be read (JSON,
 * within the size limit) answers 200 with a `CniOutcome`: its errors are CNI error objects, which
 * the plugin prints as they are.
 *
 * The contract's larger answers have files of their own: the agent's state (status.ts: status,
 * journal, plugins), what it knows of its own setup (doctor.ts) and the dashboard's data
 * (dashboard.ts). This file holds the requests and the rest of the answers, and `AgentApi`.
 */
import type { CniErrorObject } from '../cni/errors.ts';
import type { Allocation } from '../ipam/allocation.ts';
import type { DoctorFacts, NetnsDirectoryStatus } from './doctor.ts';

export type { NetnsDirectoryStatus };
import type { AgentStatus, PluginsStatus, ReconcilerStatus, UninstallReport } from './status.ts';

export type { Allocation };

// ---------------------------------------------------------------------------------------------
// CNI calls (POST /v1/cni)

/**
 * What the plugin sends: its CNI variables and the network config from stdin. Unchecked on the
 * wire: the agent trusts no caller and checks every field with the plugin's own rules.
 */
export interface CniRequest {
  readonly command: string;
  readonly containerID?: string | undefined;
  readonly netns?: string | undefined;
  readonly ifname?: string | undefined;
  /** CNI_ARGS as the runtime set it. */
  readonly args?: string | undefined;
  readonly config: unknown;
}

/** Exactly one per call: a result to print, nothing to print, or a CNI error object to print. */
export type CniOutcome =
  | { readonly kind: 'result'; readonly output: Record<string, unknown> }
  | { readonly kind: 'silent' }
  | { readonly kind: 'error'; readonly output: CniErrorObject };

// ---------------------------------------------------------------------------------------------
// Errors

/** The body of every non-200 answer. `code` is a WarrenErrorCode; `message` names the problem. */
export interface ErrorAnswer {
  readonly error: { readonly code: string; readonly message: string };
}

// ---------------------------------------------------------------------------------------------
// Pools (GET /v1/pools) and nodes (GET /v1/nodes, POST /v1/nodes/forget)

export interface PoolReport {
  readonly pool: string;
  readonly subnet?: string;
  readonly first?: string;
  readonly last?: string;
  /** Decimal: a /64 holds more addresses than a JSON number keeps exactly. */
  readonly capacity?: string;
  readonly allocated: number;
  readonly resting: number;
  /** allocated / capacity, 0..1; absent when the capacity is unknown. */
  readonly utilisation?: number;
  /** For a block of a range shared by nodes: the node that claimed it. */
  readonly node?: string;
  /** For a range split into blocks: the block prefix length and how many blocks are claimed. */
  readonly blockPrefix?: number;
  readonly blocks?: number;
  /**
   * For a range shared by nodes: the range across the cluster as its nodes published it (the figures
   * above are this node's share). `error` when it could not be read; `partial` when only the first
   * `blocks` published blocks were read.
   */
  readonly cluster?: ClusterPoolFigures;
}

export interface ClusterPoolFigures {
  /** In use across the cluster (a lent address once, at its lender). */
  readonly allocated: number;
  readonly resting: number;
  /** Of `allocated`, in use on a node that borrowed it from another node's block. */
  readonly lent?: number;
  /** Decimal: capacity − allocated − resting; absent when the capacity is unknown or the figures partial. */
  readonly free?: string;
  /** allocated / capacity, 0..1; absent when the capacity is unknown. */
  readonly utilisation?: number;
  readonly nodes: number;
  readonly blocks: number;
  /** Each node's share, in name order (a node that only borrows holds no block). */
  readonly byNode?: readonly ClusterNodeShare[];
  readonly partial?: true;
  readonly error?: string;
}

export interface ClusterNodeShare {
  readonly node: string;
  /** Its claimed blocks. */
  readonly blocks: number;
  /** In use in its blocks, lent out included. */
  readonly allocated: number;
  readonly resting: number;
  /** Addresses of other nodes' blocks it holds on loan. */
  readonly borrowed: number;
}

export interface NodeReport {
  readonly node: string;
  /** The node's agent holds its announcement now. */
  readonly alive: boolean;
  readonly since?: string;
  readonly version?: string;
  /** Blocks with this node's affinity. */
  readonly blocks: readonly string[];
  /** Allocations this node's agent made for containers. */
  readonly allocations: number;
  /** Addresses of this node's blocks lent to other nodes (its placeholders), when any are known. */
  readonly lent?: number;
}

// Reservations (GET /v1/reservations): WarrenReservation objects as this agent watches them

/** One address of a reservation still in use on a node, as the reservation's status lists it. */
export interface InUseAddress {
  readonly address: string;
  /** `namespace/name`, when the allocation names its pod. */
  readonly pod?: string;
  readonly containerID: string;
  readonly network: string;
}

/** A node's entry in a reservation's `status.inUse`: how many, and the first few. */
export interface NodeInUse {
  readonly count: number;
  readonly addresses: readonly InUseAddress[];
}

/** A range this agent's store knows that a reservation holds addresses of. */
export interface ReservationCover {
  readonly pool: string;
  readonly subnet: string;
  /** Addresses of the range's allocatable span the reservation holds back (decimal). */
  readonly reserved: string;
  /** Every allocatable address of the range is held back: nothing can be handed out there. */
  readonly whole: boolean;
}

export interface ReservationReport {
  readonly name: string;
  readonly reason?: string;
  /** `spec.addresses` as written: addresses or CIDRs. */
  readonly addresses: readonly string[];
  /** Entries that are neither addresses nor CIDRs: they reserve nothing. */
  readonly malformed: readonly string[];
  readonly covers: readonly ReservationCover[];
  /** By node, the reserved addresses still held there (released later, never handed out again). */
  readonly inUse: ReadonlyArray<NodeInUse & { readonly node: string }>;
}

export interface ReservationsReport {
  /** Whether this agent watches reservations (the Kubernetes source is on). */
  readonly watched: boolean;
  readonly reservations: readonly ReservationReport[];
}

export interface ForgetNodeRequest {
  readonly node: string;
}

export interface ForgetNodeResponse {
  readonly node: string;
  readonly released: readonly Allocation[];
  /** Blocks given back. */
  readonly blocks: readonly string[];
}

/**
 * POST /v1/store/accept: what allocation had stopped for, what the agent wrote back into the store
 * (addresses, blocks claimed again, and what it could not write back: conflicts for the operator),
 * and what still stops allocation, if anything.
 */
export interface AcceptStoreResponse {
  readonly accepted: string;
  readonly addresses: number;
  readonly blocks: number;
  readonly conflicts: readonly string[];
  readonly problem?: string;
}

// ---------------------------------------------------------------------------------------------
// Allocations (GET /v1/allocations) and release (POST /v1/release)

/** The query parameters GET /v1/allocations takes; any other is refused. */
export const ALLOCATION_QUERY_KEYS = [
  'pool',
  'network',
  'containerID',
  'ifname',
  'podNamespace',
  'podName',
  'podUID',
  'node',
  'address',
] as const;

export type AllocationQuery = { readonly [K in (typeof ALLOCATION_QUERY_KEYS)[number]]?: string | undefined };

/**
 * The query parameters that ask GET /v1/allocations for one page instead of the whole answer:
 * `limit` (1 to MAX_ALLOCATION_PAGE), `continue` (as a previous page gave it), `cluster` (`true`:
 * every node's allocations as their owners published them, on a store that publishes; else this
 * agent's store). With any of them the answer is an AllocationPage.
 */
export const ALLOCATION_PAGE_KEYS = ['limit', 'continue', 'cluster'] as const;

/** The most allocations one page holds, and the page size when only `continue` or `cluster` is given. */
export const MAX_ALLOCATION_PAGE = 5_000;
export const DEFAULT_ALLOCATION_PAGE = 500;

export interface AllocationPageRequest {
  readonly limit: number;
  /** Opaque: as the previous page gave it. */
  readonly continue?: string;
  /** Every node's allocations as published (the Kubernetes store), rather than this agent's store. */
  readonly cluster?: boolean;
}

/** One page of allocations; `continue` is present when there is more. */
export interface AllocationPage {
  readonly items: readonly Allocation[];
  readonly continue?: string;
}

/**
 * One address (in `pool` when it is allocated in several), or everything a container holds
 * (narrowed by network and interface). An address no allocation holds is NOT_FOUND; a container
 * holding nothing releases nothing. What a container still uses (its recorded network namespace
 * exists) is refused with IN_USE unless `force` says the operator means it.
 */
export type ReleaseRequest = ReleaseAddressRequest | ReleaseContainerRequest;

export interface ReleaseAddressRequest {
  readonly address: string;
  readonly pool?: string;
  /** Release even what a container still uses (its network namespace exists): IN_USE otherwise. */
  readonly force?: boolean;
}

export interface ReleaseContainerRequest {
  readonly containerID: string;
  readonly network?: string;
  readonly ifname?: string;
  /** As for an address. */
  readonly force?: boolean;
}

export interface ReleaseResponse {
  readonly released: readonly Allocation[];
}

// ---------------------------------------------------------------------------------------------
// Audit (GET /v1/audit; POST /v1/audit {fix})

export interface AuditRequest {
  /** Release what is provably stale, and nothing else. */
  readonly fix: boolean;
}

export type AuditVerdict =
  | { readonly kind: 'healthy'; readonly reason: string }
  | { readonly kind: 'stale'; readonly proof: 'journal' | 'netns-gone'; readonly reason: string }
  | { readonly kind: 'suspect'; readonly why: 'orphaned'; readonly reason: string }
  /** `unobservableBecause`: the observer's words alone, for the reconcile report's list. */
  | {
      readonly kind: 'suspect';
      readonly why: 'unobservable';
      readonly reason: string;
      readonly unobservableBecause: string;
    };

export interface AuditFinding {
  readonly allocation: Allocation;
  readonly verdict: AuditVerdict;
}

export interface AuditReport {
  readonly at: string;
  readonly counts: { readonly healthy: number; readonly stale: number; readonly suspect: number };
  readonly sources: {
    readonly journal: { readonly dir: string; readonly pending: number };
    readonly netns: readonly NetnsDirectoryStatus[];
  };
  readonly findings: readonly AuditFinding[];
  /** With fix: what was released. */
  readonly released?: readonly Allocation[];
  /** With fix: what could not be released, and why. */
  readonly errors?: readonly string[];
}

// ---------------------------------------------------------------------------------------------
// The whole API, as one interface

/**
 * Every operation the agent serves, with typed input and output. The agent implements it over
 * its services; the client implements it over the socket; routes.ts joins the two.
 */
export interface AgentApi {
  cni(request: CniRequest): Promise<CniOutcome>;
  status(): Promise<AgentStatus>;
  pools(): Promise<PoolReport[]>;
  allocations(query: AllocationQuery): Promise<Allocation[]>;
  /** One page of the allocations the query selects (the same route, with ALLOCATION_PAGE_KEYS). */
  allocationsPage(query: AllocationQuery, page: AllocationPageRequest): Promise<AllocationPage>;
  release(request: ReleaseRequest): Promise<ReleaseResponse>;
  audit(request: AuditRequest): Promise<AuditReport>;
  journal(): Promise<ReconcilerStatus>;
  nodes(): Promise<NodeReport[]>;
  reservations(): Promise<ReservationsReport>;
  forgetNode(request: ForgetNodeRequest): Promise<ForgetNodeResponse>;
  acceptStore(): Promise<AcceptStoreResponse>;
  plugins(): Promise<PluginsStatus>;
  doctor(): Promise<DoctorFacts>;
  uninstall(): Promise<UninstallReport>;
}
