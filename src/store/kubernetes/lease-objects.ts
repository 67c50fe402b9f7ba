/**
 * A coordination.k8s.io/v1 Lease as the kubernetes store reads it (lease-membership.ts): MicroTime
 * as the API server demands it (six fractional digits), when a Lease lapses, and the NodeRecord an
 * announcement carries in its annotation. Pure: no I/O; what does not parse reads as undefined.
 */
import { isPlainObject as isRecord } from '../../core/validate.ts';
import type { NodeRecord } from '../store.ts';
import { metaOf } from './objects.ts';

export const RECORD_ANNOTATION = 'warren.dev/record';

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
