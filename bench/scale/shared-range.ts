/**
 * What the harness and every node group agree on without importing each other: the shared range
 * the simulated nodes allocate from, and how a container's ADD names its owner there. Apart from
 * cluster.ts so that a node group's process (node-group-process.ts) needs nothing of the cluster.
 */
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import type { Owner } from '../../src/ipam/allocation.ts';
import type { RangeSpec } from '../../src/ipam/range.ts';

/** The shared range of `cidr` (its blocks of prefix `blockSize`, the store's adaptive size if absent). */
export function scaleRanges(cidr: string, blockSize?: number): readonly RangeSpec[] {
  const ipam = { type: 'warren', range: cidr, ...(blockSize === undefined ? {} : { block_size: blockSize }) };
  return parseIpamConfig(ipam).ranges;
}

/** The owner of container `id`'s address, as a CNI ADD names it. */
export const ownerOf = (id: string): Owner => ({ network: 'scale', containerID: id, ifname: 'eth0' });
