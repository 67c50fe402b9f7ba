/**
 * The keys and values of membership on etcd (membership.ts): a node's announcement, nodes/<node>,
 * holding its NodeRecord (on the node's lease), and a cluster chore's claim, tasks/<task>, holding
 * the claimer's node (on the claimer's lease). Every path segment percent-encoded, as the tier's keys
 * are (kv.ts). A value Warren did not write decodes to undefined, never to a node. And the wait for
 * an announcement's lease to lapse (`waitOut`).
 */
import type { Namespace } from 'etcd3';
import { describeInstance } from '../membership.ts';
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

/** What `waitOut` reads with and waits by (membership.ts' options). */
export interface WaitOutOptions {
  readonly ns: Namespace;
  readonly leaseSeconds: number;
  readonly call: <T>(what: string, body: () => Promise<T>) => Promise<T>;
  readonly notice?: ((message: string) => void) | undefined;
  readonly wait?: (ms: number) => Promise<void>;
}

// Not unref()ed: while an agent starts, this wait may be all that keeps its process alive.
const defaultWait = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The previous start of this agent on another boot holds the announcement `key`: alive elsewhere (a
 * clone) or dead (a reboot). Its lease lapses within the lease time if nobody renews it: waited for
 * (up to that and a margin), or until the key changes.
 */
export async function waitOut(
  o: WaitOutOptions,
  key: string,
  modRevision: string,
  holder: NodeRecord | undefined,
): Promise<void> {
  const boundMs = o.leaseSeconds * 1000 + 2000;
  o.notice?.(
    `this node's announcement is held by ${describeInstance(holder)}, this agent's previous start on ` +
      `another boot (a reboot, or a machine cloned with this state directory): waiting up to ` +
      `${Math.ceil(boundMs / 1000)} s for its lease to lapse`,
  );
  const wait = o.wait ?? defaultWait;
  for (let waited = 0; waited < boundMs; waited += 250) {
    const now = await o.call('read the announcement', () => o.ns.get(key).exec());
    const kv = now.kvs[0];
    if (kv === undefined || kv.mod_revision !== modRevision) return;
    await wait(250);
  }
}
