/**
 * What the fake knows of each resource it serves beyond pods, nodes and events: names, scope,
 * field labels, how its objects are admitted (pruned, decoded, validated) and how they go on the
 * wire. Custom resources come from their CRD (crds.ts), Leases are built in (leases.ts).
 */
import type { FieldError, Naming } from './status.ts';
import type { KubeObject } from './types.ts';

export interface Served extends Naming {
  readonly version: string;
  /** `group/version`. */
  readonly apiVersion: string;
  readonly listKind: string;
  readonly namespaced: boolean;
  /** Field labels supported in fieldSelector. */
  readonly fields: ReadonlySet<string>;
  /** Custom resources: keys sorted, `continue: ""` always in lists; built-in types: struct order. */
  readonly custom: boolean;
  /** metadata.generation is kept (CRs) or absent (Leases). */
  readonly generation: boolean;
  readonly statusSubresource: boolean;
  /** The RV from which a watch may start (the CRD's establishment). */
  readonly since: number;
  /** Drops unknown fields and decodes (400 for what cannot be decoded); `status` kept as given. */
  normalize(body: Record<string, unknown>): KubeObject;
  /** Spec and status errors, Kind-cased 422 (metadata checks are added by the caller). */
  validate(object: KubeObject): FieldError[];
  /** The object as the wire carries it. */
  encode(object: KubeObject): unknown;
  /** A list as the wire carries it. */
  encodeList(items: readonly KubeObject[], meta: ListMeta): unknown;
}

export interface ListMeta {
  readonly resourceVersion: string;
  readonly continue: string;
  readonly remainingItemCount?: number;
}
