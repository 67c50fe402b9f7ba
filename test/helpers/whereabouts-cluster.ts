/**
 * A cluster running whereabouts, in whereabouts' own format: the objects under
 * test/fixtures/whereabouts/cluster/ as `kubectl get -o json` lists them (IPPools and
 * OverlappingRangeIPReservations of whereabouts.cni.cncf.io/v1alpha1, NetworkAttachmentDefinitions
 * of k8s.cni.cncf.io/v1, the pods holding the addresses, and the CRDs serving them), and a reader serving them to the
 * migration without an API server (unit tests). What the fixtures hold, and what the migration
 * makes of them, is in EXPECTED_OUTCOMES.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Collection, WhereaboutsReader } from '../../src/cli/migrate/kube-reads.ts';
import type { Outcome } from '../../src/cli/migrate/plan.ts';

export const WHEREABOUTS_CLUSTER_DIR = join(import.meta.dirname, '..', 'fixtures', 'whereabouts', 'cluster');

export interface KubeList {
  readonly items: Array<Record<string, unknown> & { metadata: { name: string; namespace?: string; uid?: string } }>;
}

export interface WhereaboutsCluster {
  readonly definitions: KubeList;
  readonly ipPools: KubeList;
  readonly reservations: KubeList;
  readonly pods: KubeList;
}

const FILES: Record<keyof WhereaboutsCluster, string> = {
  definitions: 'network-attachment-definitions.json',
  ipPools: 'ippools.json',
  reservations: 'overlappingrangeipreservations.json',
  pods: 'pods.json',
};

/** A fresh copy of the fixtures (tests may change it). */
export function loadWhereaboutsCluster(): WhereaboutsCluster {
  const read = (file: string): KubeList =>
    JSON.parse(readFileSync(join(WHEREABOUTS_CLUSTER_DIR, file), 'utf8')) as KubeList;
  return {
    definitions: read(FILES.definitions),
    ipPools: read(FILES.ipPools),
    reservations: read(FILES.reservations),
    pods: read(FILES.pods),
  };
}

/**
 * The CustomResourceDefinitions of whereabouts' IPPool and OverlappingRangeIPReservation and of
 * Multus' NetworkAttachmentDefinition, for an API server that must serve them (the fake).
 */
export function whereaboutsCrds(): Array<Record<string, unknown> & { metadata: { name: string } }> {
  return (JSON.parse(readFileSync(join(WHEREABOUTS_CLUSTER_DIR, 'crds.json'), 'utf8')) as KubeList).items;
}

/** Serves a cluster's objects as the API server would; counts the pod reads. */
export class FixtureReader implements WhereaboutsReader {
  readonly cluster: WhereaboutsCluster;
  podReads = 0;

  constructor(cluster: WhereaboutsCluster = loadWhereaboutsCluster()) {
    this.cluster = cluster;
  }

  async list(collection: Collection): Promise<unknown[]> {
    return structuredClone(this.cluster[collection].items);
  }

  async pod(namespace: string, name: string): Promise<unknown> {
    this.podReads += 1;
    const pod = this.cluster.pods.items.find((p) => p.metadata.namespace === namespace && p.metadata.name === name);
    return pod === undefined ? undefined : structuredClone(pod);
  }
}

/** Every address the fixtures' whereabouts holds: its range pool, pod, node, and what a first migration does. */
export const EXPECTED_OUTCOMES: ReadonlyArray<{
  pool: string;
  address: string;
  pod: string;
  node?: string;
  outcome: Outcome;
  /** The grant's holder, for those recorded: network and interface. */
  holder?: { network: string; ifname: string };
}> = [
  {
    pool: '192.168.2.224/28',
    address: '192.168.2.225',
    pod: 'default/web-0',
    node: 'node-a',
    outcome: 'recorded',
    holder: { network: 'macvlan-a', ifname: 'net1' },
  },
  // The pod is gone: whereabouts never released it, and nothing needs to.
  { pool: '192.168.2.224/28', address: '192.168.2.226', pod: 'default/web-1', outcome: 'pod-gone' },
  // No ifname in the IPPool (older whereabouts): the pod's network-status names it.
  {
    pool: '192.168.2.224/28',
    address: '192.168.2.227',
    pod: 'default/web-2',
    node: 'node-b',
    outcome: 'recorded',
    holder: { network: 'macvlan-a', ifname: 'net1' },
  },
  {
    pool: '10.20.0.0/24@blue',
    address: '10.20.0.8',
    pod: 'team-b/db-0',
    node: 'node-a',
    outcome: 'recorded',
    holder: { network: 'blue-net', ifname: 'net1' },
  },
  // The pod runs, but its network-status lists another address: whereabouts' leftover.
  { pool: '10.20.0.0/24@blue', address: '10.20.0.9', pod: 'team-b/db-1', node: 'node-b', outcome: 'stale' },
  {
    pool: '10.30.0.0/24',
    address: '10.30.0.10',
    pod: 'team-b/app-0',
    node: 'node-c',
    outcome: 'recorded',
    holder: { network: 'dual', ifname: 'net1' },
  },
  // Held by a reservation only (its IPPool lost it).
  {
    pool: '10.30.0.0/24',
    address: '10.30.0.11',
    pod: 'team-b/app-1',
    node: 'node-c',
    outcome: 'recorded',
    holder: { network: 'dual', ifname: 'net1' },
  },
  {
    pool: 'fd00:30::/120',
    address: 'fd00:30::10',
    pod: 'team-b/app-0',
    node: 'node-c',
    outcome: 'recorded',
    holder: { network: 'dual', ifname: 'net1' },
  },
  // A definition already switched to warren, with whereabouts' keys, in a config list.
  {
    pool: '10.40.0.0/24',
    address: '10.40.0.7',
    pod: 'default/legacy-0',
    node: 'node-a',
    outcome: 'recorded',
    holder: { network: 'warren-net', ifname: 'eth1' },
  },
];
