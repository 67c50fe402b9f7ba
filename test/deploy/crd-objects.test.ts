/**
 * What the kubernetes store writes fits the CRDs it writes into (deploy/crds/): every object the
 * cluster tier makes (src/store/kubernetes/objects.ts: a range, a block, its publication, an
 * address request with its grants, an address space) is checked against its kind's schema as the
 * API server checks it, at the longest values Warren accepts (a 253-character network name and node
 * name, a 255-character container ID, IPv6 addresses, a network namespace path). A field the
 * schema does not declare would be pruned silently and read back as missing; a value past a bound
 * would make the API server refuse the write (422) for good. Either fails here.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ICustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import type { IJSONSchemaProps } from 'kubernetes-models/apiextensions.k8s.io/v1/JSONSchemaProps';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { blockKey } from '../../src/ipam/blocks.ts';
import type { Grant, PublishedBlock, RangeRecord } from '../../src/store/tiered/cluster-tier.ts';
import { blockName, rangeName, requestName, spaceName } from '../../src/store/kubernetes/names.ts';
import {
  type KubeObject,
  MAX_ITEMS,
  blockObject,
  publicationObject,
  rangeObject,
  requestObject,
  spaceObject,
} from '../../src/store/kubernetes/objects.ts';
import { documentsOf, listedFiles } from './deploy-files.ts';

const crds = documentsOf(
  listedFiles('').filter((file) => file.startsWith('crds/')),
) as unknown as ICustomResourceDefinition[];

/** Where `value` breaks `schema`, as the API server's validation and pruning would find it. */
function faults(schema: IJSONSchemaProps, value: unknown, at: string): string[] {
  switch (schema.type) {
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return [`${at} is not an object`];
      const record = value as Record<string, unknown>;
      return [
        ...(schema.required ?? []).filter((k) => record[k] === undefined).map((k) => `${at}.${k} is required`),
        ...Object.entries(record).flatMap(([k, v]) => {
          const child = schema.properties?.[k];
          return child === undefined ? [`${at}.${k} is not in the schema: pruned`] : faults(child, v, `${at}.${k}`);
        }),
      ];
    }
    case 'array': {
      if (!Array.isArray(value)) return [`${at} is not an array`];
      return [
        ...(value.length > (schema.maxItems ?? Number.POSITIVE_INFINITY) ? [`${at} has more than maxItems`] : []),
        ...value.flatMap((v, i) => faults(schema.items as IJSONSchemaProps, v, `${at}[${i}]`)),
      ];
    }
    case 'string':
      if (typeof value !== 'string') return [`${at} is not a string`];
      return value.length > (schema.maxLength ?? Number.POSITIVE_INFINITY) ? [`${at} is longer than maxLength`] : [];
    case 'integer':
      if (!Number.isInteger(value)) return [`${at} is not an integer`];
      return [
        ...((value as number) < (schema.minimum ?? Number.NEGATIVE_INFINITY) ? [`${at} is below minimum`] : []),
        ...((value as number) > (schema.maximum ?? Number.POSITIVE_INFINITY) ? [`${at} is above maximum`] : []),
      ];
    default:
      return [`${at}: type ${schema.type} is one this test does not check`];
  }
}

/** Faults of an object of the tier's against the schema of its kind; metadata is the API server's own. */
function faultsOf(object: KubeObject & { status?: unknown }): string[] {
  const crd = crds.find((c) => c.spec.names.kind === object.kind);
  assert.ok(crd, `a CRD of kind ${object.kind}`);
  const version = crd.spec.versions[0];
  assert.equal(object.apiVersion, `${crd.spec.group}/${version?.name}`);
  const { apiVersion: _, kind: __, metadata: ___, ...rest } = object;
  return faults(version?.schema?.openAPIV3Schema as IJSONSchemaProps, rest, object.kind);
}

// The longest values Warren accepts: CNI's network name and container ID, a DNS node name.
const NETWORK = `n${'e'.repeat(252)}`;
const NODE = `node-${'x'.repeat(248)}`;
const CONTAINER = `c${'0'.repeat(254)}`;
const POOL = `fd00:aaaa:bbbb:cccc:dddd:eeee:ffff:0/112@${NETWORK}`;
const KEY = blockKey(POOL, 'fd00:aaaa:bbbb:cccc:dddd:eeee:ffff:ff00/120');
const RANGE: RangeRecord = {
  pool: POOL,
  space: `v6@${NETWORK}`,
  subnet: 'fd00:aaaa:bbbb:cccc:dddd:eeee:ffff:0/112',
  first: 'fd00:aaaa:bbbb:cccc:dddd:eeee:ffff:1',
  last: 'fd00:aaaa:bbbb:cccc:dddd:eeee:ffff:fffe',
  blockPrefix: 120,
};

function allocation(i: number): Allocation {
  return {
    pool: KEY,
    address: `fd00:aaaa:bbbb:cccc:dddd:eeee:ffff:${(0xff00 + i).toString(16)}`,
    network: NETWORK,
    containerID: CONTAINER,
    ifname: 'net1-123456789a',
    podNamespace: 'n'.repeat(63),
    podName: 'p'.repeat(253),
    podUID: '0c9e0ba7-8f4f-4d8e-9d46-1b0a3cbd2a6e',
    node: NODE,
    netns: `/var/run/netns/cni-${'0'.repeat(200)}`,
    createdAt: 1_764_000_000_000 + i,
  };
}

describe('what the kubernetes store writes fits the CRDs', () => {
  it('a range record', () => {
    assert.deepEqual(faultsOf(rangeObject(rangeName(POOL), RANGE)), []);
  });

  it("a block's claim, and its publication with a full block published (every field kept)", () => {
    assert.deepEqual(faultsOf(blockObject(blockName(KEY), KEY, NODE)), []);
    const block: PublishedBlock = {
      key: KEY,
      node: NODE,
      counts: { allocated: 256, resting: 3 },
      // The last one a lent address's placeholder: the borrower node as container, the address as interface.
      allocations: Array.from({ length: 256 }, (_, i) =>
        i < 255
          ? allocation(i)
          : { ...allocation(i), network: 'warren.dev/lent', containerID: NODE, ifname: allocation(i).address },
      ),
      publishedAt: 1_764_000_000_000,
    };
    const { object, truncated } = publicationObject(blockName(KEY), block);
    assert.equal(truncated, false);
    assert.deepEqual(faultsOf(object), []);
  });

  it("a block's publication when more is held than an object takes: cut to the schema's maxItems", () => {
    const block: PublishedBlock = {
      key: KEY,
      node: NODE,
      counts: { allocated: MAX_ITEMS + 10, resting: 0 },
      allocations: Array.from({ length: MAX_ITEMS + 10 }, (_, i) => ({ ...allocation(i), netns: '/x' })),
      publishedAt: 1,
    };
    const { object } = publicationObject(blockName(KEY), block);
    assert.deepEqual(faultsOf(object), []);
  });

  it('an address request with grants of every kind (lent, and recorded by the migration with a holder)', () => {
    const grants: Grant[] = [
      { address: 'fd00:aaaa:bbbb:cccc:dddd:eeee:ffff:ff01', lender: NODE, block: KEY },
      { address: 'fd00:aaaa:bbbb:cccc:dddd:eeee:ffff:ff02', lender: 'whereabouts', holder: allocation(2) },
    ];
    const request = requestObject(requestName(POOL, NODE), { pool: POOL, node: NODE, wanted: 3, grants }, '42');
    assert.deepEqual(faultsOf(request), []);
  });

  it('an address space with its admitted ranges', () => {
    const admitted = Array.from({ length: 16 }, (_, i) => `fd00:${i.toString(16)}::/64@${NETWORK}`);
    assert.deepEqual(faultsOf(spaceObject(spaceName(RANGE.space), RANGE.space, admitted, '7')), []);
  });

  it('fails a field the schema does not declare, and a value past its bound (the check can fail)', () => {
    const range = rangeObject(rangeName(POOL), RANGE);
    assert.deepEqual(faultsOf({ ...range, spec: { ...(range.spec as object), extra: 1 } }), [
      'WarrenRange.spec.extra is not in the schema: pruned',
    ]);
    assert.deepEqual(faultsOf({ ...range, spec: { ...(range.spec as object), pool: 'p'.repeat(513) } }), [
      'WarrenRange.spec.pool is longer than maxLength',
    ]);
  });
});
