/**
 * What an ADD allocates, planned before it allocates: the ranges it draws from, the addresses it
 * asks for and the holding that keeps them. The CNI service starts from the network config (its
 * ranges; the addresses the config and CNI_ARGS ask for) and hands the plan through its planners in
 * order — pools (which pool serves the pod), addresses (an address the pod asks for), holdings (an
 * address kept for a StatefulSet ordinal or a claim) — then allocates what the last one answers.
 *
 * Guarantees:
 * - planners run one after another, in the order given, each seeing the plan the one before it
 *   answered; the first that throws ends the ADD with its error (nothing is allocated);
 * - a planner refuses with WarrenError('INVALID_CONFIG', why) (CNI code 7), naming why;
 * - with no planners the plan is the config's, unchanged (an ADD without Kubernetes is as before).
 */
import { defined } from '../../core/defined.ts';
import type { IPAddress } from '../../ipam/address.ts';
import type { RangeSpec } from '../../ipam/range.ts';
import type { NetConf } from '../../cni/netconf.ts';
import type { Route } from '../../cni/routes-and-dns.ts';

/** The pod an ADD is for, from CNI_ARGS (K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID). */
export interface PodRef {
  readonly namespace: string;
  readonly name: string;
  readonly uid?: string;
}

export interface AddPlan {
  /** The ranges the ADD takes an address from, one per range. */
  readonly ranges: readonly RangeSpec[];
  /** Addresses asked for (at most one per range is used), as the allocator takes them. */
  readonly requested: readonly IPAddress[];
  /** What holds the addresses beyond this attachment (a sticky ordinal, a claim); none by default. */
  readonly holding?: string;
  /** The routes the result reports, when not the config's (a WarrenPool's own). */
  readonly routes?: readonly Route[];
}

/** The attachment an ADD is for (CNI_CONTAINERID, CNI_IFNAME): which of a pod's networks it is. */
export interface AttachmentRef {
  readonly containerID: string;
  readonly ifname: string;
}

/**
 * One step of planning. `pod` is undefined when CNI_ARGS names no pod (not a Kubernetes ADD): a
 * planner that needs one answers the plan unchanged. `attachment` is given by the CNI service (a
 * planner reading a pod's network selection needs the interface).
 */
export type AddPlanner = (
  conf: NetConf,
  pod: PodRef | undefined,
  plan: AddPlan,
  attachment?: AttachmentRef,
) => Promise<AddPlan>;

/** The plan after every planner, in order, starting from `initial`. */
export async function runPlanners(
  planners: readonly AddPlanner[],
  conf: NetConf,
  pod: PodRef | undefined,
  initial: AddPlan,
  attachment?: AttachmentRef,
): Promise<AddPlan> {
  let plan = initial;
  // In order, never at once: each planner builds on the plan the one before it answered.
  for (const planner of planners) plan = await planner(conf, pod, plan, attachment);
  return plan;
}

/**
 * What an ADD allocated after its plan: told to whoever reports it elsewhere (a claim's status).
 * `ips` as the CNI result gives them: CIDR form, the address with its range's prefix length.
 */
export interface AddOutcome {
  readonly network: string;
  readonly pod: PodRef | undefined;
  readonly attachment: AttachmentRef;
  readonly plan: AddPlan;
  readonly ips: readonly string[];
}

/** The pod CNI_ARGS names, when it names both a namespace and a name. */
export function podRefOf(args: { podNamespace?: string; podName?: string; podUID?: string }): PodRef | undefined {
  if (args.podNamespace === undefined || args.podName === undefined) return undefined;
  return {
    namespace: args.podNamespace,
    name: args.podName,
    ...defined({ uid: args.podUID }),
  };
}
