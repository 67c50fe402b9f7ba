/**
 * What a window of clock time cost the API server, per simulated node, read from the fake's request
 * records and watch event counts (each attributed to its node by the node's own token): requests
 * per node per minute by verb and resource, writes per node per 100 s, LISTs, watch events
 * delivered by resource, and the nodes that broke the idle budget of issue 36 (no periodic LIST, at
 * most one write per 100 s). Pure: no I/O; the harness and the idle-budget test print the same text.
 */
import type { DeliveredEvents, RequestRecord } from '../../test/helpers/fake-kube-api.ts';

const WRITES = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

/** A window's counts, per node. */
export interface WindowCounts {
  readonly nodes: number;
  readonly seconds: number;
  /** Requests by `"<verb> <resource>"` over all nodes (requests of no node left out). */
  readonly byKind: ReadonlyMap<string, number>;
  /** Each node's requests by `"<verb> <resource>"`. */
  readonly perNode: ReadonlyMap<string, ReadonlyMap<string, number>>;
  /**
   * Watch events delivered to the nodes, by `"<resource> <type>"` (BOOKMARKs apart: the fake sends
   * them on real time, not on the harness's clock).
   */
  readonly watchEvents: ReadonlyMap<string, number>;
}

export function windowCounts(
  records: readonly RequestRecord[],
  events: readonly DeliveredEvents[],
  nodes: readonly string[],
  seconds: number,
): WindowCounts {
  const byKind = new Map<string, number>();
  const perNode = new Map<string, Map<string, number>>(nodes.map((n) => [n, new Map()]));
  for (const r of records) {
    const counts = r.client === undefined ? undefined : perNode.get(r.client);
    if (counts === undefined) continue;
    const key = `${r.verb ?? r.method} ${r.resource ?? r.path}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
    byKind.set(key, (byKind.get(key) ?? 0) + 1);
  }
  const watchEvents = new Map<string, number>();
  for (const e of events) {
    if (e.client === undefined || !perNode.has(e.client)) continue;
    const key = `${e.resource} ${e.type}`;
    watchEvents.set(key, (watchEvents.get(key) ?? 0) + e.count);
  }
  return { nodes: nodes.length, seconds, byKind, perNode, watchEvents };
}

const isWrite = (kind: string): boolean => WRITES.has(kind.split(' ')[0] ?? '');
const isList = (kind: string): boolean => kind.startsWith('list ');
const sum = (m: ReadonlyMap<string, number>, pick: (kind: string) => boolean): number =>
  [...m].reduce((total, [kind, n]) => total + (pick(kind) ? n : 0), 0);

/** Every request of the window, per node per minute. */
export const requestsPerNodeMinute = (c: WindowCounts): number =>
  sum(c.byKind, () => true) / c.nodes / (c.seconds / 60);

/** Writes per node per 100 s of clock. */
export const writesPerNode100s = (c: WindowCounts): number => sum(c.byKind, isWrite) / c.nodes / (c.seconds / 100);

/** LISTs in the window, over all nodes. */
export const listsIn = (c: WindowCounts): number => sum(c.byKind, isList);

/**
 * The nodes over the idle budget, each with why ("node-0003: 12 LISTs, 30 writes (budget 6)"): any
 * LIST, or more writes than one per 100 s of the window.
 */
export function idleBudgetBreaches(c: WindowCounts): string[] {
  const allowed = Math.floor(c.seconds / 100);
  const breaches: string[] = [];
  for (const [node, counts] of c.perNode) {
    const lists = sum(counts, isList);
    const writes = sum(counts, isWrite);
    if (lists > 0 || writes > allowed)
      breaches.push(`${node}: ${lists} LISTs, ${writes} writes (budget 0 LISTs, ${allowed} writes)`);
  }
  return breaches;
}

const fixed = (n: number): string => (n >= 10 ? n.toFixed(1) : n.toFixed(2));

/** The window as a table: per node per minute by verb and resource, then the totals. */
export function describeWindow(c: WindowCounts): string {
  const minutes = c.seconds / 60;
  const lines = [`${c.nodes} nodes, ${fixed(minutes)} min of clock; per node per minute, by verb and resource:`];
  for (const [kind, n] of [...c.byKind].sort(([, a], [, b]) => b - a)) {
    const counts = [...c.perNode.values()].map((m) => m.get(kind) ?? 0);
    const spread = `${Math.min(...counts)}–${Math.max(...counts)} per node in the window`;
    lines.push(`  ${kind.padEnd(44)} ${fixed(n / c.nodes / minutes).padStart(7)}   (${spread})`);
  }
  lines.push(`  ${'all requests'.padEnd(44)} ${fixed(requestsPerNodeMinute(c)).padStart(7)}`);
  lines.push(`writes per node per 100 s: ${fixed(writesPerNode100s(c))}; LISTs in the window: ${listsIn(c)}`);
  const events = [...c.watchEvents].map(([kind, n]) => `${kind} ${n}`).join(', ');
  lines.push(`watch events delivered to the nodes: ${events === '' ? 'none' : events}`);
  return lines.join('\n');
}
