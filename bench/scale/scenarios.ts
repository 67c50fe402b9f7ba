/**
 * What the scale harness drives on its cluster (cluster.ts), one function per scenario, each
 * returning what its window cost:
 * - `holdBlocks`: every node allocates a few addresses, so each holds a block of the shared range;
 * - `idleWindow`: the clock advanced with nothing to do, the requests of that window counted per
 *   node (start-up and the first allocations are outside it);
 * - `churn`: ADDs and DELs at a given rate per clock second, spread over the nodes by a seeded
 *   generator (the same seed, the same sequence), each node keeping at most a few containers; ADD
 *   times measured; then the auditor;
 * - node loss and node forget: node-events.ts;
 * - `tinyRange` (tiny-range.ts): issue 36's tiny range, skewed bursts on a /24 shared by every node,
 *   counting false exhaustions, borrow latency, stranded addresses after an idle window, duplicates.
 * The bench (bench/scale.ts) and the idle-budget test (test/store/scale/idle-budget.test.ts) run the
 * same scenarios, so the figures in BENCHMARKS.md and the budgets asserted in CI are one measure.
 */
import type { AuditReport } from './auditor.ts';
import type { ScaleCluster } from './cluster.ts';
import type { ScaleNode } from './node-host.ts';
import type { WindowCounts } from './window-counts.ts';
import { mulberry32 } from '../../test/helpers/random.ts';

/**
 * Every node allocates `perNode` addresses (containers `<node>-hold-<k>`), a few nodes at a time:
 * answers each node's first ADD's wall time in ms, sorted (the ADD that claims its first block).
 */
export async function holdBlocks(
  cluster: ScaleCluster<ScaleNode>,
  perNode: number,
  concurrency = 25,
): Promise<number[]> {
  const firstAddMs: number[] = [];
  for (let first = 0; first < cluster.nodes.length; first += concurrency) {
    const batch = cluster.nodes.slice(first, first + concurrency);
    await Promise.all(
      batch.map(async (node, k) => {
        for (let j = 0; j < perNode; j++) {
          const started = performance.now();
          await cluster.add(first + k, `${node.name}-hold-${j}`);
          if (j === 0) firstAddMs.push(performance.now() - started);
        }
      }),
    );
  }
  await cluster.settle();
  return firstAddMs.sort((a, b) => a - b);
}

/** The requests the window cost, from a clean count at its start. */
export async function counted(
  cluster: ScaleCluster<ScaleNode>,
  seconds: number,
  drive: () => Promise<void>,
): Promise<WindowCounts> {
  await cluster.beginWindow();
  await drive();
  return cluster.endWindow(seconds);
}

/** `seconds` of clock with nothing to do, in steps of `stepMs`. */
export function idleWindow(cluster: ScaleCluster<ScaleNode>, seconds: number, stepMs = 1000): Promise<WindowCounts> {
  return counted(cluster, seconds, () => cluster.advance(seconds * 1000, stepMs));
}

export interface ChurnOptions {
  /** ADDs and DELs per clock second, over the whole cluster. */
  readonly rate: number;
  readonly seconds: number;
  /** Containers a node keeps at most (an ADD becomes a DEL on a full node). */
  readonly perNodeMax?: number;
  readonly seed?: number;
}

export interface ChurnReport {
  readonly counts: WindowCounts;
  readonly adds: number;
  readonly dels: number;
  /** ADDs and DELs refused, with the first few reasons. */
  readonly failed: number;
  readonly failures: readonly string[];
  /** ADD wall times, ms, ascending. */
  readonly addMs: readonly number[];
  readonly held: number;
  readonly duplicates: readonly string[];
  /** The auditor's whole report. */
  readonly audit: AuditReport;
}

/** A small, fast, seeded generator (mulberry32, one for the tests and benches): the same seed, the same churn. */
export const generator = mulberry32;

/** ADDs and DELs at `rate` per clock second for `seconds`, one clock second at a time; then the audit. */
export async function churn(cluster: ScaleCluster<ScaleNode>, o: ChurnOptions): Promise<ChurnReport> {
  const random = generator(o.seed ?? 36);
  const max = o.perNodeMax ?? 4;
  const live = cluster.nodes.map(() => [] as string[]);
  let serial = 0;
  const addMs: number[] = [];
  const failures: string[] = [];
  let [adds, dels, failed] = [0, 0, 0];
  const second = async (): Promise<void> => {
    const calls: Promise<void>[] = [];
    // Containers ADDed this second are not DELeted in it: a DEL follows its ADD's answer, as a kubelet's does.
    const young = new Set<string>();
    for (let k = 0; k < o.rate; k++) {
      const i = Math.floor(random() * cluster.nodes.length);
      const mine = live[i] as string[];
      const old = mine.filter((id) => !young.has(id));
      const add = old.length === 0 || (mine.length < max && random() < 0.5);
      if (add && mine.length >= max) continue; // a full node with nothing old enough to DEL
      if (add) {
        const id = `churn-${serial++}`;
        mine.push(id);
        young.add(id);
        adds++;
        calls.push(
          cluster.add(i, id).then(
            (ms) => void addMs.push(ms),
            (error: unknown) => {
              failed++;
              mine.splice(mine.indexOf(id), 1);
              if (failures.length < 5) failures.push(String(error));
            },
          ),
        );
      } else {
        const id = old[Math.floor(random() * old.length)] as string;
        mine.splice(mine.indexOf(id), 1);
        dels++;
        calls.push(
          cluster.del(i, id).catch((error: unknown) => {
            failed++;
            if (failures.length < 5) failures.push(`DEL: ${String(error)}`);
          }),
        );
      }
    }
    await Promise.all(calls);
  };
  const counts = await counted(cluster, o.seconds, () => cluster.advance(o.seconds * 1000, 1000, second));
  const audit = await cluster.audit();
  addMs.sort((a, b) => a - b);
  return { counts, adds, dels, failed, failures, addMs, held: audit.held, duplicates: audit.duplicates, audit };
}
