/**
 * The operator's step for a node whose file keeps announced addresses as placeholders, on the
 * cluster stores (docs/recovery.md, "A node's disk restored from a backup or snapshot"): a file put
 * back from a copy older than the node's publication keeps each address the publication announced
 * (`ahead`) as a placeholder, since nobody can name the container an ADD may have given it; "once
 * you have checked that no running container holds them, `warren store accept` on that node releases
 * them". The soak's operator checks against the workload's ground truth (no live sandbox holds one:
 * the harness tore down every sandbox a restored file lost), as an operator checks the node's
 * running containers, and then runs the real CLI.
 *
 * A placeholder is recorded for its address as its own container (tiered/announced.ts), which is how
 * it is read from the node's file here (read-only, as the auditor reads it). A node whose placeholder
 * a live sandbox holds is left alone: releasing it would hand that address out again.
 */
import { join } from 'node:path';
import { CHILD_PATH, WARREN_BIN, run } from '../helpers/processes.ts';
import { readRecords } from './auditor.ts';
import type { GroundTruth } from './ground-truth.ts';
import type { StoreFaultContext, StoreNode } from './store.ts';

/**
 * Node `node`'s placeholders against the truth: `none` (none, or its file unreadable), `unheld` (no
 * live sandbox holds one: the operator may accept), `held` (one is in use: left alone).
 */
export function placeholdersOf(node: StoreNode, truth: GroundTruth): 'none' | 'unheld' | 'held' {
  const records = readRecords(join(node.stateDir, 'warren.db'));
  const placeholders = [...(records ?? [])].filter(([id, address]) => id === address).map(([, address]) => address);
  if (placeholders.length === 0) return 'none';
  const live = new Set(truth.all().flatMap((s) => (s.state === 'live' && s.address !== undefined ? [s.address] : [])));
  return placeholders.some((address) => live.has(address)) ? 'held' : 'unheld';
}

/** `warren store accept` on `node`'s agent (the real CLI), counted as `what`; true when accepted. */
export async function storeAccept(
  node: StoreNode,
  context: StoreFaultContext | undefined,
  what: string,
): Promise<boolean> {
  const socket = join(node.stateDir, 'warren.sock');
  const out = await run(process.execPath, [WARREN_BIN, 'store', 'accept', '--socket', socket], {
    env: { ...process.env, PATH: CHILD_PATH },
  });
  // Exit 1 with "still not allocating" while other nodes have not accepted yet: accepted all the same.
  const done = /accepted the store as it is now/.test(out.stdout);
  context?.count(done ? what : 'store accept refused (tried again)');
  if (!done) context?.log(`${node.name}: warren store accept: ${out.stdout}${out.stderr}`);
  return done;
}

/** The operator's step: `warren store accept` on `node` when its placeholders are unheld; true when it accepted. */
export async function acceptPlaceholders(
  node: StoreNode,
  truth: GroundTruth,
  context: StoreFaultContext | undefined,
): Promise<boolean> {
  const state = placeholdersOf(node, truth);
  if (state === 'held') context?.count('announced placeholders kept: a live sandbox holds one');
  if (state !== 'unheld') return false;
  return storeAccept(node, context, 'store accept of announced addresses held (docs/recovery.md)');
}
