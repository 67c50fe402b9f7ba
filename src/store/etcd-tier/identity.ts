/**
 * The store's identity record (`identity` under the key prefix): a random id written once, by the
 * first agent that finds none, and never deleted by Warren. An etcd that lost its data has none (or,
 * once an agent recreated it, another); so once an agent has verified it, every one of its commits
 * compares it (every write of the etcd tier: etcd-tier/kv.ts), and its announcement checks it
 * first (EtcdMembership).
 *
 * Guarantees: an agent that knows an identity (verified in this process, or recorded in its state
 * directory at its last run) never creates one: it halts instead. Of two agents creating it at
 * once, one wins and both adopt the winner's. A check whose read was out while the operator accepted
 * the store judges nothing and creates nothing: what it knew was the old store's (it halts and
 * records the identity only through its StoreCheck, tiered/continuity.ts, which drops both then).
 */
import { randomUUID } from 'node:crypto';
import type { Namespace } from 'etcd3';
import { WarrenError } from '../../core/errors.ts';
import { type EtcdContinuity, STORE_LOST_RECOVERY } from './continuity.ts';

/** The key of the store's identity record, under the prefix. */
export const IDENTITY_KEY = 'identity';

export interface IdentityCheck {
  readonly ns: Namespace;
  /** Runs one etcd call through the store (TRY_AGAIN on failure; the header checked). */
  readonly call: <T>(what: string, body: () => Promise<T>) => Promise<T>;
  readonly continuity: EtcdContinuity;
  /** The store, for messages: `etcd store http://...`. */
  readonly where: string;
  /** The record's full key, for messages. */
  readonly key: string;
  /** The identity this agent recorded at its last run, when it knows none in this process yet. */
  readonly expected?: string | undefined;
}

/**
 * Reads the identity record: records one in a store that never had one (unless one is known), and
 * halts when the one known is gone or replaced. Nothing to do while halted.
 */
export async function verifyIdentity(c: IdentityCheck): Promise<void> {
  if (c.continuity.halted() !== undefined) return;
  const check = c.continuity.begin();
  const known = c.continuity.identity ?? c.expected;
  const response = await c.call('read the store identity', () => c.ns.get(IDENTITY_KEY).exec());
  // The operator accepted the store while the read was out: what was known before says nothing of
  // the store accepted (the check that follows the accept judges it), and nothing is created in it.
  if (check.outdated) return;
  let found = response.kvs[0]?.value.toString('utf8');
  if (found === undefined && known === undefined) {
    const made = randomUUID();
    const created = await c.call('record the store identity', () =>
      c.ns
        .if(IDENTITY_KEY, 'Create', '==', 0)
        .then(c.ns.put(IDENTITY_KEY).value(made))
        .else(c.ns.get(IDENTITY_KEY))
        .commit(),
    );
    if (check.outdated) return;
    found = created.succeeded ? made : created.responses[0]?.response_range?.kvs[0]?.value.toString('utf8');
    if (found === undefined)
      throw new WarrenError(
        'TRY_AGAIN',
        `${c.where}: its identity record ${c.key} was created and deleted at once; try again`,
      );
  }
  if (found === undefined) {
    check.halt(
      'store-lost',
      `${c.where} lost its data: its identity record ${c.key} (${known}) is gone. ${STORE_LOST_RECOVERY}`,
    );
    return;
  }
  if (known !== undefined && found !== known) {
    check.halt(
      'store-lost',
      `${c.where} is not the store this agent knew: its identity is ${found}, not ${known} (it was wiped and ` +
        `recreated, or the endpoints reach another store). ${STORE_LOST_RECOVERY}`,
    );
    return;
  }
  check.verified(found);
}
