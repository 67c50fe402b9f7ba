/**
 * The operator's step for a node whose file keeps announced addresses as placeholders, on the
 * cluster stores (docs/recovery.md, "A node's disk restored from a backup or snapshot"): a file put
 * back from a copy older than the node's publication keeps each address the publication announced
 * (`ahead`) as a placeholder, since nobody can name the container an ADD may have given it; "once
 * you have checked that no running container holds them, `warren store accept` on that node releases
 * them". The soak's operator checks against the workload's ground truth (no live sandbox holds one),
 * as an operator checks the node's running containers, and then runs the real CLI.
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

/** The addresses node `node`'s file keeps as announced placeholders (undefined when unreadable). */
export function placeholdersOf(node: StoreNode): string[] | undefined {
  const records = readRecords(join(node.stateDir, 'warren.db'));
  return records === undefined ? undefined : [...records].filter(([id, address]) => id === address).map(([, a]) => a);
}

/**
 * `warren store accept` on `node` when its file keeps placeholders no live sandbox holds; true when
 * it ran and accepted.
 */
export async function acceptPlaceholders(
  node: StoreNode,
  truth: GroundTruth,
  context: StoreFaultContext | undefined,
): Promise<boolean> {
  const held = placeholdersOf(node) ?? [];
  if (held.length === 0) return false;
  const live = new Set(truth.all().flatMap((s) => (s.state === 'live' && s.address !== undefined ? [s.address] : [])));
  const inUse = held.filter((address) => live.has(address));
  if (inUse.length > 0) {
    context?.count('announced placeholders kept: a live sandbox holds one');
    return false;
  }
  const socket = join(node.stateDir, 'warren.sock');
  const out = await run(process.execPath, [WARREN_BIN, 'store', 'accept', '--socket', socket], {
    env: { ...process.env, PATH: CHILD_PATH },
  });
  const done = /accepted the store as it is now/.test(out.stdout);
  context?.count(
    done ? 'store accept of announced placeholders (docs/recovery.md)' : 'store accept refused (tried again)',
  );
  if (!done) context?.log(`${node.name}: warren store accept: ${out.stdout}${out.stderr}`);
  return done;
}
