/**
 * The address a pod asks for (issue 27's "addresses" planner): the pod annotation
 * `warren.dev/addresses`, read from the pod directory (the agent's pod watch; a GET only on a miss),
 * honoured as CNI_ARGS `IP=` and the `ips` capability are, or refused naming the address and why.
 *
 * The annotation is either a comma-separated list of addresses, one per family, for every network
 * the pod attaches to, or a JSON object keyed by network name (the config's `name`) whose values are
 * such lists (an array of addresses, or one comma-separated string); a network the object does not
 * name is planned as if there were no annotation. An address may carry a prefix length
 * (`10.0.0.5/24`), which is ignored, as in `IP=`.
 *
 * Guarantees:
 * - a pod without the annotation (or no pod: not a Kubernetes ADD) leaves the plan unchanged, and
 *   costs no API request when the pod is in the watch's cache;
 * - a pod that is not in the cache and cannot be read (the API server away) leaves the plan
 *   unchanged too, and is told (`onUnreadable`, logged): a pod start must not wait on the API server
 *   for an annotation it most likely does not carry (the watch brings a pod long before its ADD);
 * - a malformed annotation (not an address, two of one family, a JSON object of the wrong shape)
 *   is refused with code 7 naming the annotation and the pod;
 * - an address outside every range of the plan (after the pools planner chose them), excluded from
 *   its range (or its gateway), or reserved (WarrenReservation, ipam/reserved.ts) is refused with
 *   code 7 naming it and why; one another pod holds is refused by the allocator, naming the holder
 *   (ADDRESS_UNAVAILABLE, as for `IP=`);
 * - an annotation that asks for another address of a family than the config or CNI_ARGS asked for
 *   is refused (code 7): which to honour would be a guess.
 */
import { WarrenError } from '../../core/errors.ts';
import { isPlainObject } from '../../core/validate.ts';
import { type IPAddress, formatIP, parseIP } from '../../ipam/address.ts';
import { type RangeSpec, inSubnet } from '../../ipam/range.ts';
import { ReservedAddresses } from '../../ipam/reserved.ts';
import type { NetConf } from '../../cni/netconf.ts';
import { printable } from '../../cni/args.ts';
import type { AddPlan, AddPlanner, PodRef } from '../server/add-plan.ts';
import type { PodDirectory } from './pod-directory.ts';

/** The pod annotation naming the addresses a pod asks for. */
export const ADDRESSES_ANNOTATION = 'warren.dev/addresses';

export interface AddressPlannerOptions {
  readonly pods: Pick<PodDirectory, 'pod'>;
  /** Cluster-wide reservations, when watched: a reserved address is refused by name. */
  readonly reserved?: ReservedAddresses | undefined;
  /** Told of a pod that could not be read (not cached, the API server away): planned as configured. */
  readonly onUnreadable?: (pod: PodRef, error: unknown) => void;
}

/** The addresses the annotation's text asks for on `network`; undefined when it names none there. */
export function parseAddressesAnnotation(text: string, network: string, where: string): IPAddress[] | undefined {
  const refuse = (why: string): WarrenError =>
    new WarrenError('INVALID_CONFIG', `${where}: annotation ${ADDRESSES_ANNOTATION} ${why}`);
  const trimmed = text.trim();
  let list: string;
  if (trimmed.startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch {
      throw refuse('starts with "{" but is not a JSON object');
    }
    if (!isPlainObject(parsed)) throw refuse('is not a JSON object of network names');
    const value = parsed[network];
    if (value === undefined) return undefined;
    if (typeof value === 'string') list = value;
    else if (Array.isArray(value) && value.every((v) => typeof v === 'string')) list = value.join(',');
    else throw refuse(`names network "${network}" with neither a list of addresses nor a string`);
  } else {
    list = trimmed;
  }
  const out: IPAddress[] = [];
  for (const part of list.split(',').map((p) => p.trim())) {
    if (part === '') continue;
    const slash = part.indexOf('/');
    const ip = parseIP(slash < 0 ? part : part.slice(0, slash));
    if (ip === undefined || (slash >= 0 && !/^[0-9]{1,3}$/.test(part.slice(slash + 1))))
      throw refuse(`asks for "${printable(part)}", which is not an IP address`);
    const same = out.find((o) => o.family === ip.family);
    if (same !== undefined)
      throw refuse(`asks for two IPv${ip.family} addresses (${formatIP(same)}, ${formatIP(ip)}); one per family`);
    out.push(ip);
  }
  if (out.length === 0) throw refuse('names no address');
  return out;
}

/** Why `ip` cannot be had in the plan's ranges (code 7), or the range it falls in. */
function rangeFor(ip: IPAddress, ranges: readonly RangeSpec[], reserved: ReservedAddresses | undefined, where: string) {
  const asked = `${where} asks (annotation ${ADDRESSES_ANNOTATION}) for ${formatIP(ip)}`;
  const range = ranges.find((r) => inSubnet(r, ip) && ip.value >= r.first && ip.value <= r.last);
  if (range === undefined) {
    const spans = ranges.map(
      (r) =>
        `${formatIP({ family: r.family, value: r.first })}-${formatIP({
          family: r.family,
          value: r.last,
        })}`,
    );
    return new WarrenError(
      'INVALID_CONFIG',
      `${asked}, which is outside every range of the network (${spans.join(', ') || 'none'})`,
    );
  }
  if (range.gateway?.value === ip.value && range.gateway.family === ip.family)
    return new WarrenError('INVALID_CONFIG', `${asked}, which is the gateway of ${range.pool}`);
  if (range.excluded.some(([a, b]) => ip.value >= a && ip.value <= b))
    return new WarrenError('INVALID_CONFIG', `${asked}, which is excluded from ${range.pool}`);
  const by = reserved?.covering(ip);
  if (by !== undefined)
    return new WarrenError('INVALID_CONFIG', `${asked}, which is reserved by ${ReservedAddresses.describe(by)}`);
  return range;
}

/** The "addresses" planner: the annotation's addresses join the plan's requested ones. */
export function addressPlanner(options: AddressPlannerOptions): AddPlanner {
  return async (conf: NetConf, ref: PodRef | undefined, plan: AddPlan): Promise<AddPlan> => {
    if (ref === undefined) return plan;
    let pod: Awaited<ReturnType<AddressPlannerOptions['pods']['pod']>>;
    try {
      pod = await options.pods.pod(ref);
    } catch (error) {
      options.onUnreadable?.(ref, error);
      return plan;
    }
    const text = pod?.annotations[ADDRESSES_ANNOTATION];
    if (text === undefined) return plan;
    const where = `pod ${ref.namespace}/${ref.name}`;
    const asked = parseAddressesAnnotation(text, conf.name, where);
    if (asked === undefined) return plan;
    const requested = [...plan.requested];
    for (const ip of asked) {
      const verdict = rangeFor(ip, plan.ranges, options.reserved, where);
      if (verdict instanceof WarrenError) throw verdict;
      const other = requested.find((r) => r.family === ip.family);
      if (other !== undefined && other.value !== ip.value)
        throw new WarrenError(
          'INVALID_CONFIG',
          `${where} asks (annotation ${ADDRESSES_ANNOTATION}) for ${formatIP(ip)}, but the network config or ` +
            `CNI_ARGS asks for ${formatIP(other)}: one address per family`,
        );
      if (other === undefined) requested.push(ip);
    }
    return { ...plan, requested };
  };
}
