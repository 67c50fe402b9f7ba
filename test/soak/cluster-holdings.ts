/**
 * What the soak's auditor holds a cluster store's records to, judged from what it read of them
 * (for etcd: test/soak/store-etcd.ts reads the keys) and the workload's ground truth, never from an
 * agent's answer. Pure: no I/O, no clock but the one passed in.
 *
 * The rules (the product's: docs/etcd.md, docs/kubernetes-store.md "Blocks with node affinity"):
 * - no two claims of different nodes overlap (a claim is made by a transaction that compares every
 *   overlapping key): at once;
 * - an address a live sandbox holds lies in a block its node claims (the claim's node, or either
 *   side of a handover under way), or was granted to its node by a grant not returned (a loan).
 *   A claim deleted by hand is made again by its owner at once, from its watch; an agent that is
 *   down makes it when it is back. So an address uncovered is a violation only once its node's
 *   agent has run `boundMs` since the auditor first found it uncovered (`UncoveredClock`), and the
 *   clock starts again whenever the harness says the records are not to be judged (an etcd being
 *   restored and recovered: its claims come back with the operator's `warren store accept`).
 * Addresses are IPv4, as the soak's ranges are.
 */

/** A claim as the cluster records it: the block's CIDR and the nodes it names. */
export interface ClaimRecord {
  /** The block key, as its record names it (`<range pool>#<block CIDR>`). */
  readonly block: string;
  readonly cidr: string;
  /** The claim's node, and during a handover the node it is offered to or taken from. */
  readonly nodes: readonly string[];
}

/** A grant of an address to a node (a loan), not returned. */
export interface GrantRecord {
  readonly borrower: string;
  readonly address: string;
  readonly lender: string;
}

export interface ClusterHoldings {
  readonly claims: readonly ClaimRecord[];
  readonly grants: readonly GrantRecord[];
  /** The nodes the recovery marker waits for, while one stands. */
  readonly recoveryPending?: readonly string[];
}

/** An address a live sandbox holds, on the node its sandbox runs on. */
export interface HeldAddress {
  readonly sandbox: string;
  readonly node: string;
  readonly address: string;
}

function ipv4(address: string): number | undefined {
  const parts = address.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const part of parts) {
    const octet = Number(part);
    if (!/^[0-9]{1,3}$/.test(part) || octet > 255) return undefined;
    value = value * 256 + octet;
  }
  return value;
}

/** [first, last] of an IPv4 CIDR, or undefined for anything else. */
export function cidrSpan(cidr: string): [number, number] | undefined {
  const [base, bits] = cidr.split('/');
  const prefix = Number(bits);
  const start = base === undefined ? undefined : ipv4(base);
  if (start === undefined || !Number.isInteger(prefix) || prefix < 0 || prefix > 32) return undefined;
  const size = 2 ** (32 - prefix);
  const first = start - (start % size);
  return [first, first + size - 1];
}

function inCidr(address: string, cidr: string): boolean {
  const a = ipv4(address);
  const span = cidrSpan(cidr);
  return a !== undefined && span !== undefined && a >= span[0] && a <= span[1];
}

/** Claims of different nodes whose blocks share an address, said in words. */
export function overlappingClaims(holdings: ClusterHoldings): string[] {
  const out: string[] = [];
  const claims = holdings.claims.map((c) => ({ claim: c, span: cidrSpan(c.cidr) }));
  for (const [i, a] of claims.entries())
    for (const b of claims.slice(i + 1)) {
      if (a.span === undefined || b.span === undefined) continue;
      if (a.span[1] < b.span[0] || b.span[1] < a.span[0]) continue;
      if (a.claim.nodes.some((n) => b.claim.nodes.includes(n))) continue;
      out.push(
        `claims overlap: ${a.claim.block} (${a.claim.nodes.join(', ')}) and ${b.claim.block} (${b.claim.nodes.join(', ')})`,
      );
    }
  return out;
}

/** How the cluster records cover `held`: undefined when they do, else why not. */
export function uncovered(holdings: ClusterHoldings, held: HeldAddress): string | undefined {
  const claims = holdings.claims.filter((c) => inCidr(held.address, c.cidr));
  if (claims.some((c) => c.nodes.includes(held.node))) return undefined;
  if (holdings.grants.some((g) => g.borrower === held.node && g.address === held.address)) return undefined;
  const where =
    claims.length === 0
      ? 'no claim holds it'
      : `it lies in ${claims.map((c) => `${c.block}, claimed by ${c.nodes.join(' and ')}`).join('; ')}`;
  return `${held.node}'s live sandbox ${held.sandbox} holds ${held.address}, which its node neither claims nor borrows: ${where}`;
}

/**
 * When each live sandbox's address was first found uncovered, in its node's agent time: a claim
 * made again late (its agent down) is not a violation, one that stays missing while the agent runs
 * is.
 */
export class UncoveredClock {
  readonly #since = new Map<string, number>();

  /** Forgets every start: the records are not to be judged from before `reset`. */
  reset(): void {
    this.#since.clear();
  }

  /**
   * Judges one reading at `now`; returns the violations: what has stayed uncovered for `boundMs`
   * of `runningMs(node, from, to)` (how long that node's agent ran).
   */
  judge(
    holdings: ClusterHoldings,
    held: readonly HeldAddress[],
    now: number,
    boundMs: number,
    runningMs: (node: string, from: number, to: number) => number,
  ): Array<{ readonly key: string; readonly what: string }> {
    const out: Array<{ key: string; what: string }> = [];
    const seen = new Set<string>();
    for (const h of held) {
      const key = `${h.sandbox} ${h.address}`;
      const why = uncovered(holdings, h);
      if (why === undefined) continue;
      seen.add(key);
      const since = this.#since.get(key) ?? now;
      this.#since.set(key, since);
      const ran = runningMs(h.node, since, now);
      if (ran >= boundMs) out.push({ key: `uncovered ${key}`, what: `${why} (for ${ran} ms of its agent's time)` });
    }
    for (const key of [...this.#since.keys()]) if (!seen.has(key)) this.#since.delete(key);
    return out;
  }
}
