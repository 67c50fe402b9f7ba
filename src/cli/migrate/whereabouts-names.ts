/**
 * How whereabouts names its objects, so the migration can tell which network config an IPPool or
 * an OverlappingRangeIPReservation belongs to (pkg/storage/kubernetes/ipam.go):
 * - an IPPool is named after its `spec.range`, `:` and `/` turned into `-` (a trailing `:` first
 *   gets a `0`), after `<network_name>-` when the config names its network; with node slices
 *   (`node_slice_size`) the node's name comes between: `[<network_name>-]<node>-<slice>`;
 * - a reservation is named after its address the same way: `[<network_name>-]<address>`.
 * Names are not unambiguous on their own (a network name may hold `-`, an IPv6 address written
 * with `-` may read as a longer one): each reader is given the names it must choose among and
 * answers every reading that fits. Pure: no I/O.
 */
import { type IPAddress, formatIP, parseIP } from '../../ipam/address.ts';

/** Whereabouts' normalizeRange: the text of a range as it appears in an IPPool's name. */
export function normalizedRange(range: string): string {
  const text = range.endsWith(':') ? `${range}0` : range;
  return text.replaceAll(':', '-').replaceAll('/', '-');
}

/** The name whereabouts gives the IPPool of `range` (as written in `spec.range`) in `networkName`. */
export function ipPoolName(range: string, networkName: string): string {
  return networkName === '' ? normalizedRange(range) : `${networkName}-${normalizedRange(range)}`;
}

/**
 * The node of a node-slice IPPool name (`[<network_name>-]<node>-<slice>`), or undefined when
 * `name` is not one for this network and slice.
 */
export function sliceNodeOf(name: string, sliceRange: string, networkName: string): string | undefined {
  const prefix = networkName === '' ? '' : `${networkName}-`;
  const suffix = `-${normalizedRange(sliceRange)}`;
  if (!name.startsWith(prefix) || !name.endsWith(suffix)) return undefined;
  const node = name.slice(prefix.length, name.length - suffix.length);
  return node === '' ? undefined : node;
}

/** Whereabouts' normalizeIP: the name of the reservation of `ip` in `networkName`. */
export function reservationName(ip: IPAddress, networkName: string): string {
  const text = formatIP(ip);
  const normalized = (text.endsWith(':') ? `${text}0` : text).replaceAll(':', '-');
  return networkName === '' ? normalized : `${networkName}-${normalized}`;
}

/**
 * Every (network name, address) among `networkNames` that whereabouts would have named `name`:
 * none when the name is no reservation of these networks, several when it is ambiguous.
 */
export function readReservationName(
  name: string,
  networkNames: Iterable<string>,
): Array<{ networkName: string; address: IPAddress }> {
  const readings: Array<{ networkName: string; address: IPAddress }> = [];
  for (const networkName of new Set(networkNames)) {
    const prefix = networkName === '' ? '' : `${networkName}-`;
    if (!name.startsWith(prefix)) continue;
    const rest = name.slice(prefix.length);
    // IPv4 names keep their dots; IPv6 ones had every ':' turned into '-'.
    const candidate = rest.includes('.') && !rest.includes('-') ? rest : rest.replaceAll('-', ':');
    const address = parseIP(candidate);
    // Only the canonical spelling is whereabouts' (Go prints addresses one way).
    if (address !== undefined && reservationName(address, networkName) === name)
      readings.push({ networkName, address });
  }
  return readings;
}
