/**
 * A coordination.k8s.io/v1 Lease as the kubernetes store reads and writes it (lease-membership.ts):
 * MicroTime as the API server demands it (six fractional digits), when a Lease lapses, the NodeRecord
 * an announcement carries in its annotation, a node announcement as written, and the two writes of
 * a ping (lease-ping.ts): the asker's annotation on another's Lease, and the prover's vacating of a
 * Lease whose holder did not answer. Pure: no I/O; what does not parse reads as undefined.
 */
import { isPlainObject as isRecord } from '../../core/validate.ts';
import type { NodeRecord } from '../store.ts';
import { LEASE_LABEL, NODE_LABEL, labelValue, nodeLeaseName } from './names.ts';
import { type KubeObject, metaOf } from './objects.ts';

export const RECORD_ANNOTATION = 'warren.dev/record';
/** A ping on a node announcement: `<asker>/<id>`, written by a node that wants its holder to answer. */
export const PING_ANNOTATION = 'warren.dev/ping';
/** The holder's answer: the ping it answers, written with a fresh renewTime. */
export const PONG_ANNOTATION = 'warren.dev/pong';

/** `ms` since the epoch as a Kubernetes MicroTime: RFC 3339 with exactly six fractional digits. */
export function microTime(ms: number): string {
  const iso = new Date(Math.floor(ms)).toISOString(); // 2026-11-24T22:30:40.242Z
  return `${iso.slice(0, -1)}000Z`;
}

/** A MicroTime (or any RFC 3339 time) in ms since the epoch; NaN when unreadable. */
export function parseMicroTime(text: string): number {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(text);
  if (m === null) return Number.NaN;
  const whole = Date.parse(`${m[1]}${m[3]}`);
  return whole + Number(`0.${m[2] ?? '0'}`) * 1000;
}

export interface LeaseView {
  readonly name: string;
  readonly uid: string;
  readonly version: string;
  readonly holder: string | undefined;
  /** When it lapses, ms since the epoch (0 when it says nothing readable). */
  readonly expires: number;
  /** When it was last renewed, ms since the epoch (0 when it says nothing readable). */
  readonly renewed: number;
  readonly transitions: number;
  readonly acquired: string | undefined;
  readonly annotations: Readonly<Record<string, string>>;
}

export function leaseOf(object: unknown): LeaseView | undefined {
  const meta = metaOf(object);
  if (meta === undefined || !isRecord(object) || !isRecord(object.spec)) return undefined;
  const s = object.spec;
  const renewed = typeof s.renewTime === 'string' ? parseMicroTime(s.renewTime) : Number.NaN;
  const seconds = typeof s.leaseDurationSeconds === 'number' ? s.leaseDurationSeconds : 0;
  return {
    name: meta.name,
    uid: meta.uid,
    version: meta.resourceVersion,
    holder: typeof s.holderIdentity === 'string' ? s.holderIdentity : undefined,
    expires: Number.isNaN(renewed) ? 0 : renewed + seconds * 1000,
    renewed: Number.isNaN(renewed) ? 0 : renewed,
    transitions: typeof s.leaseTransitions === 'number' ? s.leaseTransitions : 0,
    acquired: typeof s.acquireTime === 'string' ? s.acquireTime : undefined,
    annotations: meta.annotations ?? {},
  };
}

export function recordOf(lease: LeaseView | undefined): NodeRecord | undefined {
  const text = lease?.annotations[RECORD_ANNOTATION];
  if (text === undefined) return undefined;
  try {
    const r = JSON.parse(text) as NodeRecord;
    return isRecord(r) && typeof r.node === 'string' ? r : undefined;
  } catch {
    return undefined;
  }
}

/** What a Lease's next write carries over from the one it replaces. */
export type Predecessor = Pick<LeaseView, 'version' | 'transitions' | 'acquired'>;

/**
 * A node announcement written at `at.now` by `instance`: over `lease` (guarded by its
 * resourceVersion) when there is one, acquired anew (a transition) when `acquire`, answering the
 * ping `pong` when given.
 */
export function announcementObject(
  a: { readonly node: string; readonly instance: string; readonly record: NodeRecord },
  at: { readonly now: number; readonly leaseSeconds: number },
  lease: Predecessor | undefined,
  acquire: boolean,
  pong?: string,
): KubeObject {
  const now = microTime(at.now);
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: nodeLeaseName(a.node),
      labels: { [LEASE_LABEL]: 'node', [NODE_LABEL]: labelValue(a.node) },
      annotations: {
        [RECORD_ANNOTATION]: JSON.stringify(a.record),
        ...(pong === undefined ? {} : { [PONG_ANNOTATION]: pong }),
      },
      ...(lease === undefined ? {} : { resourceVersion: lease.version }),
    },
    spec: {
      holderIdentity: a.instance,
      leaseDurationSeconds: at.leaseSeconds,
      acquireTime: acquire || lease?.acquired === undefined ? now : lease.acquired,
      renewTime: now,
      leaseTransitions: lease === undefined ? 0 : lease.transitions + (acquire ? 1 : 0),
    },
  };
}

/** The Lease `object` as read, with its annotations changed by `change`, guarded by its resourceVersion. */
function amended(object: unknown, change: (annotations: Record<string, string>) => void): KubeObject | undefined {
  const meta = metaOf(object);
  if (meta === undefined || !isRecord(object)) return undefined;
  const annotations = { ...(meta.annotations ?? {}) };
  change(annotations);
  const metadata = isRecord(object.metadata) ? object.metadata : {};
  return { ...object, metadata: { ...metadata, annotations } } as KubeObject;
}

/** The Lease `object` as read, carrying the ping `id` (an RV-guarded PUT: of two writers one wins). */
export function pingedObject(object: unknown, id: string): KubeObject | undefined {
  return amended(object, (annotations) => {
    annotations[PING_ANNOTATION] = id;
  });
}

/**
 * The Lease `object` as read, held by nobody: its holder did not answer a ping, so it is gone. It
 * stays a node announcement (its record kept, for the operator) that nothing lists as alive and
 * any agent of that node takes over at once.
 */
export function vacatedObject(object: unknown): KubeObject | undefined {
  const lease = amended(object, (annotations) => {
    delete annotations[PING_ANNOTATION];
  });
  if (lease === undefined || !isRecord(lease.spec)) return undefined;
  const { holderIdentity: _gone, ...spec } = lease.spec;
  return { ...lease, spec };
}
