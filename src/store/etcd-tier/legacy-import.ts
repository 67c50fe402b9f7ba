/**
 * The move of an etcd store written in the old one-tier layout to the two-tier one, run by each
 * agent at start. The old layout (etcd-tier/documents.ts) kept one document per pool under `units/`
 * (a block's document: its affinity, cursor, description, allocated addresses with their owners,
 * resting addresses) and each allocation's full record under `owners/`. The two-tier store keeps
 * the addresses of a node's blocks in the node's SQLite file and only the claims in etcd.
 *
 * What one pass does, while any `units/` key is left (one keys-only read of one key otherwise):
 * 1. every old block document with an affinity becomes a claim of the same block (same CIDR, so no
 *    address moves) in the tier, in the name of the node the affinity names, its range pinned at
 *    the block size it was split into; so a node that has not started again yet keeps its blocks,
 *    and nobody else claims them meanwhile (placement reads the claims);
 * 2. each block of this node is imported into its SQLite file in ONE local commit (the claim, its
 *    description, cooldown and cursor, every allocation with its full record, every resting
 *    address), only while the local file does not have the block yet;
 * 3. once every block of this node is imported, the node's old documents and owner records are
 *    deleted, each block's in one transaction that applies only if the document is still the one
 *    read (an agent of the old version still writing it keeps it, and is reported).
 * Crash-safe and idempotent: a crash anywhere leaves a state the next pass completes — a claim
 * already held by the node is the node's; a block already in the local file is not imported
 * again; the documents go only after the local commits. So every allocation ends up exactly once,
 * and no block is claimed twice (claims are create-if-absent; one held by another node than the
 * document's affinity is reported, never taken over).
 *
 * A block's allocations all go to the node that takes the block, those other nodes had borrowed in
 * it too (the old store lent by writing into the lender's block): they stay held there, never
 * handed out twice, and are released by an operator (`warren release --address`) when their pods
 * go, since the borrower's agent does not hold them. An old block no node held that still holds
 * allocations is taken by the first node its owner records name.
 *
 * Old blocks of a node that never comes back stay claimed in its name: the forget-node path (its
 * Node deleted) frees them and removes its old documents (`forgetLegacyNode`); until then
 * `legacyLeft` counts them for `warren doctor`.
 */
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { blockKeyPrefix, isBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import type { LegacyLeft } from '../cluster.ts';
import type { ClusterTier, RangeRecord } from '../tiered/cluster-tier.ts';
import { type UnitDoc, ownerRecordKey, parseDoc } from './documents.ts';
import type { LedgerOp, Store } from '../store.ts';
import { recordFromKey, spaceOfPool } from '../tiered/ranges.ts';
import type { TierKv } from './kv.ts';

const UNITS = 'units/';
/** Old documents per page: a block's document may hold a few hundred allocations. */
const PAGE = 50;

export interface LegacyReport {
  /** Old blocks of this node imported into its SQLite file by this pass. */
  readonly imported: number;
  /** Allocations those blocks held. */
  readonly allocations: number;
  /** Old blocks (of any node) newly claimed in the tier by this pass. */
  readonly claimed: number;
  /** Old blocks of this node whose documents were removed by this pass. */
  readonly removed: number;
  /** What could not be done, each naming the block and why (the next start tries again). */
  readonly problems: readonly string[];
  /** The other nodes that still have old blocks (not started on this version yet, or gone). */
  readonly others: readonly string[];
}

interface OldDoc {
  readonly pool: string;
  readonly revision: number;
  readonly doc: UnitDoc;
}

/** Every old document, page by page, handed to `visit` (bounded memory: a page at a time). */
async function eachDoc(kv: TierKv, what: string, visit: (d: OldDoc) => Promise<void>): Promise<void> {
  let from: string | undefined;
  do {
    const page = await kv.page(what, UNITS, { limit: PAGE, ...defined({ continue: from }) });
    for (const item of page.kvs) {
      const pool = kv.relative(item).slice(UNITS.length);
      await visit({ pool, revision: Number(item.mod_revision), doc: parseDoc(pool, item.value) });
    }
    from = page.continue;
  } while (from !== undefined);
}

/** Whether any old document is left: one keys-only read of at most one key. */
export async function legacyPresent(kv: TierKv): Promise<boolean> {
  return (await kv.page('look for the old layout', UNITS, { limit: 1 }, { keysOnly: true })).kvs.length > 0;
}

/** The range's record as the old layout split it: its description's block size, else the block key's. */
function rangeRecordOf(rangePool: string, described: UnitDoc['description'], blockKey: string): RangeRecord {
  if (described?.blockPrefix === undefined) return recordFromKey(blockKey);
  const { subnet, first, last, blockPrefix } = described;
  return { pool: rangePool, space: spaceOfPool(rangePool), subnet, first, last, blockPrefix };
}

/** The full records of a block's allocations: the owner records, or what the document says when one is missing. */
async function recordsOf(kv: TierKv, node: string, d: OldDoc): Promise<{ allocations: Allocation[]; keys: string[] }> {
  const owners = Object.entries(d.doc.allocations);
  const keys = owners.map(([, [network, containerID, ifname]]) => ownerRecordKey(network, containerID, ifname, d.pool));
  const found = new Map<string, Allocation>();
  for (const item of await kv.getMany(`read the owner records of ${d.pool}`, keys)) {
    const a = JSON.parse(item.value.toString('utf8')) as Allocation;
    if (a.pool === d.pool) found.set(a.address, a);
  }
  const allocations = owners.map(
    ([address, [network, containerID, ifname]]): Allocation =>
      found.get(address) ?? { pool: d.pool, address, network, containerID, ifname, node, createdAt: 0 },
  );
  return { allocations, keys: keys.filter((_, i) => found.has(owners[i]?.[0] ?? '')) };
}

/**
 * Who takes an old block no node held that still holds allocations (the block of a node the old
 * store forgot, in which live nodes had borrowed addresses): the first node its owner records name,
 * so its addresses stay held. Undefined for a block holding none (it is free).
 */
async function nodeOfUnowned(kv: TierKv, d: OldDoc): Promise<string | undefined> {
  if (Object.keys(d.doc.allocations).length === 0) return undefined;
  const { allocations } = await recordsOf(kv, '', d);
  return allocations.map((a) => a.node).find((n) => n !== '');
}

/** The one local commit importing block `d`. */
function importOps(node: string, d: OldDoc, allocations: readonly Allocation[]): LedgerOp[] {
  const { doc } = d;
  const cooldown = doc.cooldownSeconds ?? doc.description?.cooldownSeconds;
  return [
    { op: 'claim', node },
    ...(doc.description === undefined ? [] : [{ op: 'describe' as const, description: doc.description }]),
    ...(cooldown === undefined ? [] : [{ op: 'cooldown' as const, seconds: cooldown }]),
    ...(doc.cursor === undefined ? [] : [{ op: 'cursor' as const, address: doc.cursor }]),
    ...allocations.map((allocation) => ({ op: 'allocate' as const, allocation })),
    ...Object.entries(doc.resting).map(([address, reusableAt]) => {
      const stamp = doc.restStamps?.[address];
      const reusableStamp =
        Array.isArray(stamp) && stamp[0] === reusableAt ? { reusableStamp: { boot: stamp[1], at: stamp[2] } } : {};
      return { op: 'release' as const, address, reusableAt, ...reusableStamp };
    }),
  ];
}

export interface LegacyImport {
  readonly kv: TierKv;
  readonly tier: ClusterTier;
  /** This node's SQLite store. */
  readonly local: Store;
  readonly node: string;
}

/** One pass of the move (see the header); nothing to do, at the cost of one read, once no old document is left. */
export async function importLegacy(o: LegacyImport): Promise<LegacyReport> {
  const { kv, tier, local, node } = o;
  const others = new Set<string>();
  const report = {
    imported: 0,
    allocations: 0,
    claimed: 0,
    removed: 0,
    problems: [] as string[],
    others: [] as string[],
  };
  if (!(await legacyPresent(kv))) return report;
  const described = new Map<string, UnitDoc['description']>();
  const pinned = new Map<string, RangeRecord>();
  const mine: OldDoc[] = [];
  await eachDoc(kv, 'read the old layout', async (d) => {
    if (!isBlockKey(d.pool)) {
      described.set(d.pool, d.doc.description);
      return;
    }
    const holder = d.doc.affinity ?? (await nodeOfUnowned(kv, d));
    if (holder === undefined) return;
    const rangePool = rangePoolOfKey(d.pool);
    let range = pinned.get(rangePool);
    if (range === undefined) {
      range = await tier.pinRange(rangeRecordOf(rangePool, described.get(rangePool), d.pool));
      pinned.set(rangePool, range);
    }
    if ((await tier.claim(range, d.pool, holder)) !== undefined) report.claimed++;
    else {
      const held = await tier.claimOf(d.pool);
      if (held?.node !== holder) {
        report.problems.push(
          `old block ${d.pool} of node ${holder} is claimed by node ${held?.node ?? 'nobody'} in the tier: ` +
            'left as it is',
        );
        return;
      }
    }
    if (holder === node) mine.push(d);
    else others.add(holder);
  });
  report.others = [...others].sort();
  // Every block of this node in the local file before any of its documents goes.
  const imported: { d: OldDoc; owners: string[] }[] = [];
  for (const d of mine) {
    const { allocations, keys } = await recordsOf(kv, node, d);
    const read = await local.readLedger(d.pool);
    if (read.revision === 0) {
      const result = await local.commit(d.pool, 0, importOps(node, d, allocations));
      // Serving without them would hand out addresses its containers hold: the start fails instead.
      if (result.kind === 'conflict')
        throw new WarrenError('IO_FAILURE', `old block ${d.pool} could not be imported: ${result.reason}`);
      report.imported++;
      report.allocations += allocations.length;
    }
    imported.push({ d, owners: keys });
  }
  await importRanges(local, described, mine);
  for (const { d, owners } of imported) {
    if (await removeOldDoc(kv, d, owners)) report.removed++;
    else report.problems.push(`old block ${d.pool} changed since it was read (an agent of the old version runs?)`);
  }
  await dropEmptyRanges(kv, described);
  return report;
}

/** Removes the old documents of ranges with no old block document left (their description is in the tier). */
/**
 * Removes an old block's document and its owner records, only if the document is still the one read
 * (its mod revision): false when it changed meanwhile (an agent of the old version wrote it).
 */
async function removeOldDoc(kv: TierKv, d: OldDoc, owners: readonly string[]): Promise<boolean> {
  const unit = kv.key(`${UNITS}${d.pool}`);
  const response = await kv.write(`remove the old document of ${d.pool}`, {
    compare: [{ key: unit, target: 'Mod', result: 'Equal', mod_revision: d.revision }],
    success: [
      { request_delete_range: { key: unit } },
      ...owners.map((k) => ({ request_delete_range: { key: kv.key(k) } })),
    ],
    failure: [],
  });
  return response.succeeded;
}

async function dropEmptyRanges(kv: TierKv, ranges: ReadonlyMap<string, unknown>): Promise<void> {
  for (const rangePool of ranges.keys()) {
    const blocks = await kv.page(
      'look for old blocks',
      `${UNITS}${blockKeyPrefix(rangePool)}`,
      { limit: 1 },
      {
        keysOnly: true,
      },
    );
    if (blocks.kvs.length > 0) continue;
    const unit = kv.key(`${UNITS}${rangePool}`);
    await kv.write(`remove the old document of ${rangePool}`, {
      compare: [],
      success: [{ request_delete_range: { key: unit } }],
      failure: [],
    });
  }
}

/** The descriptions of the ranges of the imported blocks, into the local file (their block size above all). */
async function importRanges(local: Store, described: Map<string, UnitDoc['description']>, mine: readonly OldDoc[]) {
  for (const rangePool of new Set(mine.map((d) => rangePoolOfKey(d.pool)))) {
    const description = described.get(rangePool);
    if (description?.blockPrefix === undefined) continue;
    const summary = (await local.ledgers(rangePool)).find((p) => p.ledger === rangePool);
    if (summary?.description !== undefined) continue;
    await local.commit(rangePool, summary?.revision ?? 0, [{ op: 'describe', description }]);
  }
}

/**
 * Removes the old documents of `node` (a node gone for good, forgotten): its blocks' documents and
 * owner records, and no more. Answers the blocks whose documents went.
 */
export async function forgetLegacyNode(kv: TierKv, node: string): Promise<string[]> {
  if (!(await legacyPresent(kv))) return [];
  const gone: string[] = [];
  const theirs: { d: OldDoc; owners: string[] }[] = [];
  const ranges = new Map<string, true>();
  await eachDoc(kv, `read the old documents of ${node}`, async (d) => {
    if (!isBlockKey(d.pool)) ranges.set(d.pool, true);
    else if (d.doc.affinity === node) theirs.push({ d, owners: (await recordsOf(kv, node, d)).keys });
  });
  for (const { d, owners } of theirs) {
    if (await removeOldDoc(kv, d, owners)) gone.push(d.pool);
  }
  await dropEmptyRanges(kv, ranges);
  return gone;
}

/** What is left of the old layout, for `warren doctor`: old blocks per node, and range documents. */
export async function legacyLeft(kv: TierKv): Promise<LegacyLeft> {
  const blocks: Record<string, number> = {};
  let ranges = 0;
  if (!(await legacyPresent(kv))) return { blocks, ranges };
  await eachDoc(kv, 'read the old layout', async (d) => {
    if (!isBlockKey(d.pool)) ranges++;
    else {
      const holder = d.doc.affinity ?? '(no node)';
      blocks[holder] = (blocks[holder] ?? 0) + 1;
    }
  });
  return { blocks, ranges };
}

/** A failed pass, naming what failed: the agent does not start (its own blocks' addresses are not in its file yet). */
export function legacyFailure(error: unknown): WarrenError {
  const code = error instanceof WarrenError ? error.code : 'TRY_AGAIN';
  return new WarrenError(
    code,
    `moving this node's blocks from the old etcd layout (units/) to its SQLite file failed; the next start ` +
      `tries again: ${messageOf(error)}`,
    { cause: error },
  );
}
