/**
 * The keys and values of membership on etcd (membership.ts): a node's announcement, nodes/<node>,
 * holding its NodeRecord (on the node's lease), and a cluster chore's claim, tasks/<task>, holding
 * the claimer's node (on the claimer's lease). Every path segment percent-encoded, as the tier's keys
 * are (kv.ts). A value Warren did not write decodes to undefined, never to a node.
 */
import type { NodeRecord } from '../store.ts';

const enc = encodeURIComponent;

/** Where the claim of a cluster chore (`forget-node/n3`) lives in etcd. */
export function taskKey(task: string): string {
  return `tasks/${task.split('/').map(enc).join('/')}`;
}

/** Where a node's announcement lives in etcd. */
export function nodeKey(node: string): string {
  return `nodes/${enc(node)}`;
}

/** The node that holds a chore's claim; undefined for a value Warren did not write. */
export function claimantOf(value: Buffer | undefined): string | undefined {
  try {
    const node: unknown =
      value === undefined ? undefined : (JSON.parse(value.toString('utf8')) as { node?: unknown }).node;
    return typeof node === 'string' ? node : undefined;
  } catch {
    return undefined;
  }
}

/** A node's announcement; undefined for a value Warren did not write. */
export function recordOf(value: Buffer | string | undefined): NodeRecord | undefined {
  if (value === undefined) return undefined;
  try {
    const record = JSON.parse(value.toString()) as NodeRecord;
    return typeof record === 'object' && record !== null && typeof record.node === 'string' ? record : undefined;
  } catch {
    return undefined;
  }
}
