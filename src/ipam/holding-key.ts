/**
 * Holdings: addresses that belong to a holder other than one pod (allocator/holdings/). Two codecs,
 * pure (no I/O):
 * - the holder key: `statefulset/<namespace>/<name>/<ordinal>` (a StatefulSet's pod of one ordinal,
 *   whichever pod object that is now) or `ipamclaim/<namespace>/<name>` (a KubeVirt IPAMClaim);
 * - the use ledger key: where a node records pods' use of a held address in its own store, a pool
 *   of one address keyed `<range pool>#held:<address>/<holder key>` (store-key.ts's use). It is not a block key of
 *   any range (its part after `#` is no CIDR) nor a loan ledger's (loan-key.ts), so block placement,
 *   lending and give-back never take one for theirs; and it belongs to its range pool, so the
 *   store's one-address-per-owner-and-range rule covers a pod's use like any allocation of it.
 *
 * Guarantees: `parseHolderKey(holderKey(h))` gives `h` back for every holder whose parts are
 * Kubernetes names (no `/`); `isUseKey` is true exactly for
 * keys `useKey` makes, and `usePoolOf(useKey(p, a, h))` gives `p`, `a` and `h` back.
 */
import { parseIP, formatIP } from './address.ts';
import { formatStoreKey, parseStoreKey } from './store-key.ts';

export type Holder =
  | { readonly kind: 'statefulset'; readonly namespace: string; readonly name: string; readonly ordinal: number }
  | { readonly kind: 'ipamclaim'; readonly namespace: string; readonly name: string };

/** The kinds of holder, as the key's first part and the records' label say them. */
export type HolderKind = Holder['kind'];

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/** The key of `holder`. */
export function holderKey(holder: Holder): string {
  return holder.kind === 'statefulset'
    ? `statefulset/${holder.namespace}/${holder.name}/${holder.ordinal}`
    : `ipamclaim/${holder.namespace}/${holder.name}`;
}

/** The holder a key names, or undefined when `key` is none (wrong kind, parts, or a part no name). */
export function parseHolderKey(key: string): Holder | undefined {
  const parts = key.split('/');
  const [kind, namespace, name, ordinal] = parts;
  if (namespace === undefined || name === undefined || !NAME.test(namespace) || !NAME.test(name)) return undefined;
  if (kind === 'ipamclaim' && parts.length === 3) return { kind, namespace, name };
  if (kind === 'statefulset' && parts.length === 4 && ordinal !== undefined && /^(0|[1-9][0-9]{0,8})$/.test(ordinal))
    return { kind, namespace, name, ordinal: Number(ordinal) };
  return undefined;
}

/** Why `key` is no holder key, or undefined when it is one. */
export function holderKeyProblem(key: string): string | undefined {
  return parseHolderKey(key) === undefined
    ? `${JSON.stringify(key)} is not a holding key ` +
        '(statefulset/<namespace>/<name>/<ordinal> or ipamclaim/<namespace>/<name>)'
    : undefined;
}

/** What a use ledger's key names: the held address and its holder. */
export interface UseLedger {
  readonly rangePool: string;
  readonly address: string;
  readonly holder: string;
}

/**
 * The pool in which a node records pods' use of `address`, held for `holder` in range pool
 * `rangePool`: `<range pool>#held:<address>/<holder key>` (an address holds no `/`; a holder key
 * no `#`), so the key says which holding its uses are of.
 */
export function useKey(rangePool: string, address: string, holder: string): string {
  const ip = parseIP(address);
  return formatStoreKey({ kind: 'use', rangePool, address: ip === undefined ? address : formatIP(ip), holder });
}

/** Whether ledger `key` is a use ledger (useKey). */
export function isUseKey(key: string): boolean {
  return parseStoreKey(key).kind === 'use';
}

/** The address and holder a use ledger key names, or undefined when `key` is no use ledger. */
export function useLedgerOf(key: string): UseLedger | undefined {
  const k = parseStoreKey(key);
  if (k.kind !== 'use') return undefined;
  const ip = parseIP(k.address);
  if (ip === undefined || parseHolderKey(k.holder) === undefined) return undefined;
  return { rangePool: k.rangePool, address: formatIP(ip), holder: k.holder };
}
