/**
 * KubeVirt's IPAMClaim CRD (test/fixtures/ipamclaims/) for the fake API server, which refuses CRDs
 * using schema keywords it does not implement rather than ignoring them. The fixture keeps the
 * upstream shape; what is dropped here is named: the CEL rules (`x-kubernetes-validations`: spec
 * fields immutable, each CIDR valid, two CIDRs of two families) and `format` (date-time, int64) of
 * the conditions. Tests that write a claim's status check its CIDRs themselves (ipam/range.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseYaml } from './fake-kube-api/crds.ts';
import type { CrdObject } from './fake-kube-api/types.ts';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'ipamclaims', 'k8s.cni.cncf.io_ipamclaims.yaml');
/** The schema keywords the fake does not implement that the upstream CRD uses. */
const DROPPED = new Set(['x-kubernetes-validations', 'format']);

function withoutDropped(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutDropped);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => !DROPPED.has(key))
      .map(([key, v]) => [key, withoutDropped(v)]),
  );
}

/** The IPAMClaim CRD as the fake serves it. */
export function ipamClaimCrd(): CrdObject {
  return withoutDropped(parseYaml(readFileSync(FIXTURE, 'utf8'))) as CrdObject;
}
