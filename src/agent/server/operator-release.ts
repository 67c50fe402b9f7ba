/**
 * An operator's release (`warren release`, POST /v1/release): one address, or what a container
 * holds. Destructive, so guarded:
 * - an address nothing holds is NOT_FOUND (a typo is not a silent no-op);
 * - an address held in several pools must name one;
 * - a bookkeeping record (an address held for another node) is never released here;
 * - what a container still uses (its recorded network namespace exists) is IN_USE unless `force`.
 * What it releases goes through the allocator's one release path and is told to telemetry.
 */
import { defined } from '../../core/defined.ts';
import { WarrenError } from '../../core/errors.ts';
import { formatIP, parseIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { bookkeepingLabel, isBookkeeping } from '../../ipam/bookkeeping.ts';
import type { Allocator } from '../../allocator/allocator.ts';
import type { Store } from '../../store/store.ts';
import type { ReleaseRequest, ReleaseResponse } from '../../api/protocol.ts';
import type { Telemetry } from '../metrics/telemetry.ts';

export interface ReleaseParts {
  readonly store: Store;
  readonly allocator: Allocator;
  /** Those of `held` a container still uses (their network namespace exists). */
  readonly inUse: (held: readonly Allocation[]) => Allocation[];
  readonly telemetry: Telemetry;
}

export async function operatorRelease(request: ReleaseRequest, o: ReleaseParts): Promise<ReleaseResponse> {
  if ('address' in request) {
    const ip = parseIP(request.address);
    if (ip === undefined)
      throw new WarrenError('BAD_REQUEST', `release: address "${request.address}" is not an IP address`);
    const address = formatIP(ip);
    const held = await o.store.list({ address, ...defined({ ledger: request.pool }) });
    if (held.length === 0) {
      throw new WarrenError(
        'NOT_FOUND',
        `release: no allocation holds ${address}${request.pool === undefined ? '' : ` in ${request.pool}`}` +
          ' (warren allocations --address lists what does)',
      );
    }
    // A bookkeeping record (a lent address's placeholder) holds the address for another node:
    // releasing it would hand the address out here while that node uses it.
    const kept = held.find((a) => isBookkeeping(a));
    if (kept !== undefined)
      throw new WarrenError(
        'BAD_REQUEST',
        `release: ${address} in ${kept.pool} is ${bookkeepingLabel(kept)}, a record Warren keeps for no ` +
          'container; it goes when that ends',
      );
    const pools = [...new Set(held.map((a) => a.pool))];
    if (pools.length > 1)
      throw new WarrenError(
        'BAD_REQUEST',
        `release: ${address} is allocated in several pools (${pools.join(', ')}); name one with pool`,
      );
    refuseInUse(o.inUse(held), request.force, '--address');
    const released: Allocation[] = [];
    for (const pool of pools) released.push(...(await o.allocator.releaseAddresses(pool, [address])));
    o.telemetry.released('operator', released, `released by an operator (warren release --address ${address})`);
    return { released };
  }
  const { containerID, network, ifname } = request;
  // A bookkeeping record names a node as its container (lent to it), not a container: never released here.
  const held = (await o.store.list({ containerID, network, ifname })).filter((a) => !isBookkeeping(a));
  refuseInUse(o.inUse(held), request.force, '--container');
  const released: Allocation[] = [];
  for (const heldIn of new Set(held.map((a) => a.network))) {
    released.push(
      ...(await o.allocator.release({
        network: heldIn,
        containerID,
        ...defined({ ifname }),
      })),
    );
  }
  o.telemetry.released('operator', released, `released by an operator (warren release --container ${containerID})`);
  return { released };
}

/**
 * An operator's release never takes an address from a container that still uses it unless told
 * to: IN_USE names each allocation whose recorded network namespace exists and the flag to give.
 */
function refuseInUse(used: readonly Allocation[], force: boolean | undefined, how: string): void {
  if (force === true || used.length === 0) return;
  const which = used.map((a) => `${a.address} (container ${a.containerID}, network namespace ${a.netns})`);
  throw new WarrenError(
    'IN_USE',
    `release: ${which.join(', ')} ${used.length === 1 ? 'is' : 'are'} still in use: the network namespace ` +
      `exists. Releasing would let another container get the address while this one has it; ` +
      `to release anyway, run warren release ${how} ... --force`,
  );
}
