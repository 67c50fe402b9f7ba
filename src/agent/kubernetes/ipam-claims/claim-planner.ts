/**
 * The "ipamclaims" ADD planner: an attachment whose network selection element names an IPAMClaim
 * (`ipam-claim-reference`, multi-network spec 1.3; KubeVirt's ipam-extensions sets it on each
 * virt-launcher pod of a VM whose network allows persistent IPs) takes its addresses from the
 * claim's holding, `ipamclaim/<pod namespace>/<claim>`: the same address for every launcher pod
 * of the VM, on any node — after a restart, and for both pods of a live migration at once.
 *
 * Guarantees:
 * - the element is the one Multus made the ADD from: the `k8s.v1.cni.cncf.io/networks` element on
 *   the ADD's interface, or for eth0 the `v1.multus-cni.io/default-network` one; an ADD with no
 *   pod, no such element, or an element naming no claim is planned as before (no holding);
 * - the pod and the claim are read from the agent's watches: no API request on the common path
 *   (one GET each only on a miss);
 * - refused with INVALID_CONFIG (CNI code 7), naming the pod, the claim and why: an annotation that
 *   cannot be read, a claim that does not exist or is being deleted, a claim made for another
 *   network than this ADD's (spec.network is the CNI config's name), a plan already held by
 *   something else (two holders for one attachment), or an agent whose store keeps no holdings
 *   (`unsupported`: the VM would silently lose its address at its next start; there only networks
 *   whose config says `"allowPersistentIPs": true` are looked at, so other ADDs read no pod);
 * - a pod that cannot be read (the API server away and the pod not in the watch yet) is TRY_AGAIN
 *   (code 11): whether it names a claim is unknown;
 * - the claim's `spec.ipRequests` are asked for (one per family), beside what the plan asks.
 */
import { WarrenError, messageOf } from '../../../core/errors.ts';
import { type IPAddress, parseIP } from '../../../ipam/address.ts';
import {
  DEFAULT_INTERFACE,
  DEFAULT_NETWORK_ANNOTATION,
  NETWORKS_ANNOTATION,
  type NetworkSelectionElement,
  defaultElementOn,
  elementOnInterface,
  parseNetworkSelection,
} from '../../../cni/network-selection.ts';
import type { AddPlanner } from '../../server/add-plan.ts';
import type { PodView } from '../pod-directory.ts';
import { type ClaimRef, type ClaimView, claimHolderKey } from './claim-cache.ts';

export interface ClaimPlannerOptions {
  /** The pod as the agent's watch holds it (PodDirectory.pod). */
  readonly pod: (ref: { namespace: string; name: string; uid?: string }) => Promise<PodView | undefined>;
  /** The claim as the agent's watch holds it (ClaimCache.claim). */
  readonly claim: (ref: ClaimRef) => Promise<ClaimView | undefined>;
  /**
   * Why this agent cannot hold a claim's addresses (its store keeps no holdings), when it cannot:
   * an ADD naming a claim is then refused saying so, never served with an address that would not
   * follow the VM.
   */
  readonly unsupported?: string;
}

/**
 * The selection element the ADD on `ifname` was made from, by the pod's annotations. eth0 is the
 * cluster network's (Multus numbers the others net1, net2...): its ADD reads only the
 * default-network annotation, so a networks annotation Warren cannot read never fails a pod's eth0.
 */
export function elementOf(
  annotations: Readonly<Record<string, string>>,
  ifname: string,
): NetworkSelectionElement | undefined {
  const primary = annotations[DEFAULT_NETWORK_ANNOTATION];
  if (ifname === DEFAULT_INTERFACE) return primary === undefined ? undefined : defaultElementOn(primary, ifname);
  const networks = annotations[NETWORKS_ANNOTATION];
  const element = networks === undefined ? undefined : elementOnInterface(parseNetworkSelection(networks), ifname);
  if (element !== undefined) return element;
  // The cluster network's element when it names an interface of its own.
  return primary === undefined ? undefined : defaultElementOn(primary, ifname);
}

/** The addresses of `spec.ipRequests`-like CIDRs (or plain addresses); unreadable ones are skipped. */
function addressesOf(cidrs: readonly string[]): IPAddress[] {
  const out: IPAddress[] = [];
  for (const text of cidrs) {
    const ip = parseIP(text.includes('/') ? text.slice(0, text.indexOf('/')) : text);
    if (ip !== undefined) out.push(ip);
  }
  return out;
}

export function ipamClaimPlanner(options: ClaimPlannerOptions): AddPlanner {
  return async (conf, pod, plan, attachment) => {
    if (pod === undefined || attachment === undefined) return plan;
    // On a store that keeps no holdings only a network made for persistent IPs is looked at: other
    // ADDs there are served as before, with no pod read.
    if (options.unsupported !== undefined && conf.allowPersistentIPs !== true) return plan;
    let view: PodView | undefined;
    try {
      view = await options.pod(pod);
    } catch (error) {
      // Whether the pod names a claim is unknown: an address that would not follow its VM is no answer.
      throw new WarrenError(
        'TRY_AGAIN',
        `cannot read pod ${pod.namespace}/${pod.name} to learn whether it names an IPAMClaim: ${messageOf(error)}`,
        { cause: error },
      );
    }
    if (view === undefined) return plan;
    const where = `pod ${pod.namespace}/${pod.name}`;
    let element: NetworkSelectionElement | undefined;
    try {
      element = elementOf(view.annotations, attachment.ifname);
    } catch (error) {
      throw new WarrenError('INVALID_CONFIG', `${where}: ${(error as Error).message}`, { cause: error });
    }
    const name = element?.ipamClaimReference;
    if (name === undefined) return plan;
    const ref = { namespace: pod.namespace, name };
    const what = `${where} (interface ${attachment.ifname}) names IPAMClaim ${ref.namespace}/${name}`;
    if (options.unsupported !== undefined)
      throw new WarrenError('INVALID_CONFIG', `${what}, but ${options.unsupported}`);
    const claim = await options.claim(ref);
    if (claim === undefined) throw new WarrenError('INVALID_CONFIG', `${what}, which does not exist`);
    if (claim.deleting) throw new WarrenError('INVALID_CONFIG', `${what}, which is being deleted`);
    if (claim.network !== conf.name)
      throw new WarrenError(
        'INVALID_CONFIG',
        `${what}, which was made for network ${JSON.stringify(claim.network)}, not ${JSON.stringify(conf.name)}`,
      );
    const holding = claimHolderKey(claim);
    if (plan.holding !== undefined && plan.holding !== holding)
      throw new WarrenError('INVALID_CONFIG', `${what}, but its addresses are already held as ${plan.holding}`);
    const requested = [...plan.requested];
    for (const ip of addressesOf(claim.ipRequests)) {
      if (!requested.some((r) => r.family === ip.family)) requested.push(ip);
    }
    return { ...plan, requested, holding };
  };
}

/** The claim a holder key names, when it is a claim's (`ipamclaim/<namespace>/<name>`). */
export function claimOfHolding(holding: string | undefined): ClaimRef | undefined {
  const parts = holding?.split('/');
  if (parts === undefined || parts.length !== 3 || parts[0] !== 'ipamclaim') return undefined;
  const [, namespace, name] = parts as [string, string, string];
  return namespace === '' || name === '' ? undefined : { namespace, name };
}
