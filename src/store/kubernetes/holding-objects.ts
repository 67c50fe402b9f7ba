/**
 * WarrenAddressHolding objects on the wire (deploy/crds/warrenaddressholdings.yaml) and the
 * holding records made from them (store/cluster-holdings.ts). Pure: no I/O.
 *
 * Guarantees: what is read is checked (an object whose spec lacks what Warren writes reads as
 * undefined); the labels always agree with the spec and uses (owner node, range, holder, its kind,
 * one user label per node in `uses`), so listings select on the server what they read.
 */
import { defined } from '../../core/defined.ts';
import { isPlainObject as isRecord } from '../../core/validate.ts';
import { parseHolderKey } from '../../ipam/holding-key.ts';
import type { HoldingRecord, HoldingUse, NewHolding } from '../cluster-holdings.ts';
import {
  API_VERSION,
  BLOCK_LABEL,
  HOLDER_KIND_LABEL,
  HOLDER_LABEL,
  NODE_LABEL,
  RANGE_LABEL,
  holdingName,
  labelValue,
  userLabel,
} from './names.ts';
import { type KubeObject, metaOf } from './objects.ts';

const str = (v: unknown): v is string => typeof v === 'string';

/** The namespace a holder's records live in: the holder's own. */
export function holdingNamespace(key: string): string | undefined {
  return parseHolderKey(key)?.namespace;
}

export function holdingObject(h: NewHolding, uses: readonly HoldingUse[], resourceVersion?: string): KubeObject {
  const labels: Record<string, string> = {
    [NODE_LABEL]: labelValue(h.owner),
    [RANGE_LABEL]: labelValue(h.pool),
    [HOLDER_LABEL]: labelValue(h.key),
    [HOLDER_KIND_LABEL]: parseHolderKey(h.key)?.kind ?? 'unknown',
    [BLOCK_LABEL]: labelValue(h.block),
  };
  for (const u of uses) labels[userLabel(u.node)] = 'true';
  return {
    apiVersion: API_VERSION,
    kind: 'WarrenAddressHolding',
    metadata: {
      name: holdingName(h.key, h.pool),
      namespace: holdingNamespace(h.key) ?? '',
      labels,
      ...defined({ resourceVersion }),
    },
    spec: { holder: h.key, pool: h.pool, address: h.address, node: h.owner, block: h.block },
    status: { uses: uses.map(useEntry) },
  };
}

function useEntry(u: HoldingUse): Record<string, unknown> {
  return {
    node: u.node,
    network: u.network,
    containerID: u.containerID,
    ifname: u.ifname,
    ...defined({ podNamespace: u.podNamespace, podName: u.podName, podUID: u.podUID }),
    since: Math.max(0, Math.floor(u.since)),
  };
}

function useOf(v: unknown): HoldingUse | undefined {
  if (!isRecord(v) || !str(v.node) || !str(v.network) || !str(v.containerID) || !str(v.ifname)) return undefined;
  return {
    node: v.node,
    network: v.network,
    containerID: v.containerID,
    ifname: v.ifname,
    ...(str(v.podNamespace) ? { podNamespace: v.podNamespace } : {}),
    ...(str(v.podName) ? { podName: v.podName } : {}),
    ...(str(v.podUID) ? { podUID: v.podUID } : {}),
    since: typeof v.since === 'number' ? v.since : 0,
  };
}

export function holdingOf(object: unknown): HoldingRecord | undefined {
  const meta = metaOf(object);
  if (meta === undefined || !isRecord(object)) return undefined;
  const s = isRecord(object.spec) ? object.spec : undefined;
  if (s === undefined || !str(s.holder) || !str(s.pool) || !str(s.address) || !str(s.node) || !str(s.block)) return;
  const status = isRecord(object.status) ? object.status : {};
  const uses = (Array.isArray(status.uses) ? status.uses : []).map(useOf).filter((u) => u !== undefined);
  const created = isRecord(object.metadata) ? Date.parse(String(object.metadata.creationTimestamp ?? '')) : Number.NaN;
  return {
    key: s.holder,
    pool: s.pool,
    address: s.address,
    owner: s.node,
    block: s.block,
    uses,
    createdAt: Number.isNaN(created) ? 0 : created,
    uid: meta.uid,
    version: meta.resourceVersion,
  };
}
