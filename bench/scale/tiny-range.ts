/**
 * Issue 36's tiny range, as a scale scenario (`npm run bench:scale -- --tiny-range --nodes 200`,
 * and test/store/scale/tiny-range.test.ts at 20 nodes): one small range (a /24, a /26 in CI) shared
 * by every node, its block size the store's own (adaptive: /31 on a /24, one address on a /26),
 * demand skewed (80% of the pods on 10% of the nodes) and in bursts, each burst taking the range
 * past full, DELs between them, then a window of idle clock and a last burst that drains the range.
 *
 * What it measures, by an auditor independent of the allocator (every node's file, read through its
 * store, and the claims in the cluster, read as any node reads them):
 * - false exhaustions: ADDs refused with POOL_EXHAUSTED while an address of the range was free
 *   anywhere. A burst only adds, so an address free once it is over was free all through it: each
 *   refusal of a burst is false while one is (min(refused, free at its end));
 * - borrow latency: each ADD's time on the harness's ManualClock from its call to its answer (0 for
 *   one served from the node's own room; the others asked other nodes), p50/p99 of those that
 *   waited; the clock is stepped by STEP_MS (the resolution; COARSE_STEP_MS past FINE_MS) once the
 *   cluster is quiet, so the figure does not depend on the machine;
 * - stranded after the idle window: free addresses in claimed blocks that hold no pod of their
 *   owner, in loans their borrower does not use, or held by a lender for a loan no longer held
 *   (`stranded` below), as a share of the range;
 * - duplicates: the harness's independent auditor (auditor.ts: every node's file and the cluster's
 *   objects) after the idle window and after the last burst.
 */
import { isWarrenError } from '../../src/core/errors.ts';
import { formatIP } from '../../src/ipam/address.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { blockKeyPrefix, blockOfKey } from '../../src/ipam/blocks.ts';
import { isBookkeeping } from '../../src/ipam/bookkeeping.ts';
import { type RangeSpec, capacityOf } from '../../src/ipam/range.ts';
import { isLoanKey, loanAddressOf } from '../../src/ipam/loan-key.ts';
import { LENT_NETWORK, RETURNED_NETWORK } from '../../src/allocator/lending/loans.ts';
import { splitInStore } from '../../src/allocator/lending/split-range.ts';
import type { ScaleCluster } from './cluster.ts';
import { ownerOf } from './shared-range.ts';
import { generator } from './scenarios.ts';

/** Clock step while ADDs wait (ms): the resolution of the borrow latency. */
export const STEP_MS = 10;
/** How long after a burst starts the clock takes STEP_MS steps; COARSE_STEP_MS after. */
const FINE_MS = 1_000;
const COARSE_STEP_MS = 250;

export interface TinyRangeOptions {
  /** Bursts before the idle window. */
  readonly bursts?: number;
  /** Idle clock before the last burst, seconds (600: the issue's ten minutes). */
  readonly idleSeconds?: number;
  readonly seed?: number;
}

export interface TinyRangeReport {
  readonly capacity: number;
  readonly blockPrefix: number | undefined;
  readonly adds: number;
  readonly served: number;
  /** Refused as full, in all; and of those, refused while an address was free (false). */
  readonly exhausted: number;
  readonly falseExhaustions: number;
  /** For each burst with false refusals, where its free addresses were at its end (`whereFree`). */
  readonly falseWhere: readonly string[];
  /** Refusals other than POOL_EXHAUSTED, with the first few reasons. */
  readonly failed: number;
  readonly failures: readonly string[];
  /** Clock ms of the ADDs that waited for other nodes, ascending. */
  readonly borrowMs: readonly number[];
  /** Wall ms of every ADD, ascending. */
  readonly addWallMs: readonly number[];
  /** After the idle window, before the last burst: the audit. */
  readonly idle: Audit;
  /** After the last burst: every address of the range in use, or the false exhaustions counted. */
  readonly drained: Audit;
  readonly duplicates: readonly string[];
}

export interface Audit {
  readonly used: number;
  readonly free: number;
  /** Free addresses no node can hand out until a grace ends (see the header). */
  readonly stranded: number;
  readonly strandedWhy: readonly string[];
  /** Every free address by where it is (`whereFree`). */
  readonly freeWhere: Readonly<Record<string, number>>;
  readonly claimedBlocks: number;
}

/** The scenario (see the header). The cluster's nodes are fresh: they hold nothing of its range. */
export async function tinyRange(cluster: ScaleCluster, o: TinyRangeOptions = {}): Promise<TinyRangeReport> {
  const random = generator(o.seed ?? 36);
  const range = cluster.ranges[0];
  if (range === undefined) throw new Error('the cluster has no range');
  const capacity = Number(capacityOf(range));
  const n = cluster.nodes.length;
  const hot = Math.max(1, Math.round(n / 10));
  const live = cluster.nodes.map(() => [] as string[]);
  const state = { serial: 0, adds: 0, served: 0, exhausted: 0, falseExhaustions: 0, failed: 0 };
  const failures: string[] = [];
  const borrowMs: number[] = [];
  const addWallMs: number[] = [];
  const falseWhere: string[] = [];
  const pick = (): number =>
    random() < 0.8 ? Math.floor(random() * hot) : hot + Math.floor(random() * Math.max(1, n - hot));

  /** `count` ADDs at once, the clock stepped until every one is answered; then the false refusals. */
  const burst = async (count: number): Promise<void> => {
    let pending = 0;
    let refused = 0;
    const calls = Array.from({ length: count }, async () => {
      const i = Math.min(n - 1, pick());
      const id = `tiny-${state.serial++}`;
      pending++;
      state.adds++;
      const [clock0, wall0] = [cluster.clock.monotonic(), performance.now()];
      try {
        await cluster.nodes[i]?.allocator.allocate({ owner: ownerOf(id), ranges: cluster.ranges });
        live[i]?.push(id);
        state.served++;
        const waited = cluster.clock.monotonic() - clock0;
        if (waited > 0) borrowMs.push(waited);
      } catch (error) {
        if (isWarrenError(error, 'POOL_EXHAUSTED')) refused++;
        else {
          state.failed++;
          if (failures.length < 5) failures.push(String(error));
        }
      } finally {
        addWallMs.push(performance.now() - wall0);
        pending--;
      }
    });
    await cluster.settle();
    // Fine steps while answers come (the latency's resolution), coarse ones through the waits of a
    // range truly full (an ADD waits the borrower's 15 s before it is refused).
    const started = cluster.clock.monotonic();
    while (pending > 0) {
      const step = cluster.clock.monotonic() - started < FINE_MS ? STEP_MS : COARSE_STEP_MS;
      await cluster.advance(step, step);
    }
    await Promise.all(calls);
    state.exhausted += refused;
    if (refused > 0) {
      const after = await audit(cluster);
      state.falseExhaustions += Math.min(refused, after.free);
      if (after.free > 0) {
        falseWhere.push(`${refused} refused, ${after.free} free: ${describeWhere(after.freeWhere)}`);
      }
    }
  };

  /** DELs of a `share` of the live pods, chosen at random. */
  const dels = async (share: number): Promise<void> => {
    const calls: Promise<void>[] = [];
    for (const [i, mine] of live.entries()) {
      for (const id of [...mine]) {
        if (random() >= share) continue;
        mine.splice(mine.indexOf(id), 1);
        calls.push(cluster.del(i, id));
      }
    }
    await Promise.all(calls);
    await cluster.settle();
  };

  const bursts = o.bursts ?? 6;
  for (let b = 0; b < bursts; b++) {
    // Past full: what is live plus three quarters of the range, at once.
    await burst(Math.ceil(capacity * 0.75));
    await dels(0.5);
    await cluster.advance(20_000, 1000); // the upkeep's rounds run between bursts
  }
  // Every cold node's pods end, the hot nodes keep theirs; then the idle window.
  await dels(0.5);
  for (let i = hot; i < n; i++) for (const id of (live[i] ?? []).splice(0)) await cluster.del(i, id);
  await cluster.advance((o.idleSeconds ?? 600) * 1000, 5000);
  const idle = await audit(cluster);
  const idleDuplicates = (await cluster.audit()).duplicates;
  // The last burst asks for more than is free: every free address must be handed out.
  await burst(idle.free + Math.ceil(capacity / 10));
  const drained = await audit(cluster);
  const duplicates = [...new Set([...idleDuplicates, ...(await cluster.audit()).duplicates])];
  borrowMs.sort((a, b) => a - b);
  addWallMs.sort((a, b) => a - b);
  const blockPrefix = (await pinnedSplit(cluster))?.blockPrefix;
  return { capacity, blockPrefix, ...state, failures, falseWhere, borrowMs, addWallMs, idle, drained, duplicates };
}

/** The range as the store split it (its pinned smallest and largest block), as the first node that served it reads it. */
async function pinnedSplit(cluster: ScaleCluster): Promise<RangeSpec | undefined> {
  const range = cluster.ranges[0];
  if (range === undefined) return undefined;
  for (const node of cluster.nodes) {
    const split = await splitInStore(node.store, range);
    if (split !== undefined) return split;
  }
  return undefined;
}

/**
 * What the range holds: the addresses pods hold across every node's file, the claims of the range as the
 * cluster has them, and what is free and stranded (duplicates are the auditor's: auditor.ts); and, for
 * every free address, where it is (`freeWhere`: what kept a node that asked from it).
 */
export async function audit(cluster: ScaleCluster): Promise<Audit> {
  const range = cluster.ranges[0];
  if (range === undefined) throw new Error('the cluster has no range');
  // The range as the store split it: its smallest and its largest block, so a grown block's claim is read.
  const split = (await pinnedSplit(cluster)) ?? range;
  const blockPrefix = split.blockPrefix;
  const pods = new Set<string>(); // addresses a pod holds, on any node
  const all: Array<Allocation & { readonly holder: string }> = [];
  for (const node of cluster.nodes) {
    for (const a of await node.store.list({ rangePool: cluster.pool })) {
      all.push({ ...a, holder: node.name });
      if (!isBookkeeping(a)) pods.add(a.address);
    }
  }
  const used = pods.size;
  const free = Number(capacityOf(range)) - used;
  // The claims as the cluster has them (a node's reading of the range, claims only).
  const first = cluster.nodes[0];
  const claims =
    first === undefined ? [] : await first.store.cluster?.owners.rangeBlocks(cluster.pool, { counts: false });
  const claimed = (claims ?? []).filter((p) => p.affinity !== undefined);
  const stranded = new Map<string, string>();
  const podsOf = (holder: string, pool: string) =>
    all.filter((a) => a.holder === holder && a.pool === pool && !isBookkeeping(a)).length;
  for (const claim of claimed) {
    const block = blockOfKey(split, claim.ledger);
    if (block === undefined || podsOf(claim.affinity ?? '', claim.ledger) > 0) continue;
    // The nodes its placeholders lend to: one, and the block is handed over to it after the grace
    // (src/allocator/lending/handover.ts); two or more, and it stays its owner's.
    const borrowers = new Set(
      all
        .filter((a) => a.holder === claim.affinity && a.pool === claim.ledger && a.network === LENT_NETWORK)
        .map((a) => a.containerID),
    ).size;
    const lending = borrowers === 0 ? '' : `, lending to ${borrowers === 1 ? 'one node' : `${borrowers} nodes`}`;
    for (let v = block.span.first; v <= block.span.last; v++) {
      const address = formatIP({ family: range.family, value: v });
      if (!pods.has(address) && !excluded(split, v))
        stranded.set(address, `in ${claim.ledger}, held by ${claim.affinity} with no pod of its own${lending}`);
    }
  }
  // Loans: a loan ledger held with no pod and not given back (no mark), which only its borrower can use.
  const idleLoans = new Map<string, string>(); // address → its borrower
  for (const node of cluster.nodes) {
    for (const p of await node.store.ledgers(blockKeyPrefix(cluster.pool))) {
      const value = isLoanKey(p.ledger, blockPrefix) ? loanAddressOf(range, p.ledger) : undefined;
      if (value === undefined || p.affinity !== undefined) continue;
      const address = formatIP({ family: range.family, value });
      const held = all.filter((a) => a.holder === node.name && a.pool === p.ledger);
      if (held.length === 0 && !pods.has(address)) {
        stranded.set(address, `an idle loan of ${node.name}`);
        idleLoans.set(address, node.name);
      }
    }
  }
  // Placeholders for a loan its borrower no longer holds (given back, its grant gone): free, yet held.
  const placeholders = new Map<string, string>(); // address → how its loan stands
  for (const a of all) {
    if (a.network !== LENT_NETWORK || pods.has(a.address)) continue;
    const loan = all.find((x) => x.holder === a.containerID && x.address === a.address && x.pool !== a.pool);
    const how = loan === undefined ? 'idle or gone' : loan.network === RETURNED_NETWORK ? 'given back' : undefined;
    if (how !== undefined) stranded.set(a.address, `lent by ${a.holder} to ${a.containerID}, loan ${how}`);
    placeholders.set(a.address, loan === undefined ? 'not adopted or gone' : (how ?? 'in use'));
  }
  const freeWhere = await whereFree(cluster, split, { pods, all, claimed, idleLoans, placeholders, podsOf });
  // How many for each reason (the nodes' names left out), then a few examples.
  const reasons = new Map<string, number>();
  for (const why of stranded.values()) {
    const reason = why.replace(/node-\d+/g, 'n').replace(/^in \S+,/, 'in a block,');
    reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
  }
  const strandedWhy = [
    ...[...reasons].map(([reason, count]) => `${count}× ${reason}`),
    ...[...stranded].slice(0, 3).map(([address, why]) => `e.g. ${address} ${why}`),
  ];
  return { used, free, stranded: stranded.size, strandedWhy, freeWhere, claimedBlocks: claimed.length };
}

/**
 * Where each free address of the range is, counted by kind: an idle loan at its borrower, a lender's
 * placeholder (its loan given back, or not adopted), resting in its block, free in a block its owner
 * uses or in one it does not (an idle block, by size), in no claimed block. Owners and borrowers are
 * said hot (the tenth of the nodes that gets 80% of the pods) or cold.
 */
async function whereFree(
  cluster: ScaleCluster,
  split: RangeSpec,
  seen: {
    readonly pods: ReadonlySet<string>;
    readonly all: ReadonlyArray<Allocation & { readonly holder: string }>;
    readonly claimed: ReadonlyArray<{ readonly ledger: string; readonly affinity?: string | undefined }>;
    readonly idleLoans: ReadonlyMap<string, string>;
    readonly placeholders: ReadonlyMap<string, string>;
    readonly podsOf: (holder: string, pool: string) => number;
  },
): Promise<Record<string, number>> {
  const hot = Math.max(1, Math.round(cluster.nodes.length / 10));
  const heat = (name: string | undefined) => (cluster.nodes.findIndex((n) => n.name === name) < hot ? 'hot' : 'cold');
  const blockOf = new Map<bigint, { key: string; owner: string; prefix: number }>();
  const resting = new Set<string>();
  for (const claim of seen.claimed) {
    const block = blockOfKey(split, claim.ledger);
    if (block === undefined) continue;
    for (let v = block.span.first; v <= block.span.last; v++)
      blockOf.set(v, { key: claim.ledger, owner: claim.affinity ?? '', prefix: block.prefix });
    const owner = cluster.nodes.find((n) => n.name === claim.affinity);
    const read = await owner?.store.readLedger(claim.ledger);
    if (read?.kind === 'snapshot') for (const r of read.resting) resting.add(r.address);
  }
  const counts: Record<string, number> = {};
  for (let v = split.first; v <= split.last; v++) {
    const address = formatIP({ family: split.family, value: v });
    if (seen.pods.has(address) || excluded(split, v)) continue;
    const block = blockOf.get(v);
    const borrower = seen.idleLoans.get(address);
    const placeholder = seen.placeholders.get(address);
    let kind: string;
    if (borrower !== undefined) kind = `an idle loan at a ${heat(borrower)} borrower`;
    else if (placeholder !== undefined) kind = `a placeholder, its loan ${placeholder}`;
    else if (resting.has(address)) kind = 'resting';
    else if (block === undefined) kind = 'in no claimed block';
    else {
      const uses = seen.podsOf(block.owner, block.key) > 0 ? 'a block its owner uses' : 'an idle block';
      kind = `free in ${uses} (/${block.prefix}, ${heat(block.owner)} owner)`;
    }
    counts[kind] = (counts[kind] ?? 0) + 1;
  }
  return counts;
}

/** `freeWhere` as one line, most first. */
export function describeWhere(where: Readonly<Record<string, number>>): string {
  return Object.entries(where)
    .sort((a, b) => b[1] - a[1])
    .map(([kind, count]) => `${count} ${kind}`)
    .join('; ');
}

function excluded(range: { readonly excluded: ReadonlyArray<readonly [bigint, bigint]> }, v: bigint): boolean {
  return range.excluded.some(([a, b]) => v >= a && v <= b);
}
