/**
 * What a window of clock time cost the API server, per simulated node, read from the fake's request
 * records and watch event counts (each attributed to its node by the node's own token): requests
 * per node per minute by verb and resource, writes per node per 100 s, LISTs, watch events
 * delivered by resource, the fan-out of the window's changes (per resource: the changes the nodes
 * made, the watch events delivered to the nodes per change, and how many nodes got any), and the nodes
 * that broke the idle budget of issue 36 (no periodic LIST, at most one write per 100 s). The records
 * are the fake's (fake-control.ts) or made from the nodes' own counters (client-counts.ts). Pure: no
 * I/O; the harness and the idle-budget test print the same text.
 */
import type { DeliveredEvents } from '../../test/helpers/fake-kube-api.ts';
import type { CountedRequest } from './fake-control.ts';

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
  /** Whether watch events were counted at all (not by the nodes' own counters: client-counts.ts). */
  readonly eventsCounted: boolean;
  /** The fan-out of the window's changes, by resource (plural, a subresource's writes its object's). */
  readonly fanOut: ReadonlyMap<string, FanOut>;
}

/** What the nodes' changes of one resource cost in watch events over a window. */
export interface FanOut {
  /** The nodes' writes answered 2xx: each one change of an object (one RV). */
  readonly changes: number;
  /** Watch events of the resource delivered to the nodes, BOOKMARKs apart. */
  readonly delivered: number;
  /** Nodes that got at least one such event in the window. */
  readonly nodesReached: number;
}

export function windowCounts(
  records: readonly CountedRequest[],
  counted: readonly DeliveredEvents[] | undefined,
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
  const events = counted ?? [];
  const watchEvents = new Map<string, number>();
  for (const e of events) {
    if (e.client === undefined || !perNode.has(e.client)) continue;
    const key = `${e.resource} ${e.type}`;
    watchEvents.set(key, (watchEvents.get(key) ?? 0) + e.count);
  }
  const fanOut = fanOutOf(records, events, perNode);
  return { nodes: nodes.length, seconds, byKind, perNode, watchEvents, eventsCounted: counted !== undefined, fanOut };
}

/** Per resource: the nodes' changes (their 2xx writes) and the watch events (no BOOKMARK) they got. */
function fanOutOf(
  records: readonly CountedRequest[],
  events: readonly DeliveredEvents[],
  nodes: ReadonlyMap<string, unknown>,
): Map<string, FanOut> {
  const changes = new Map<string, number>();
  for (const r of records) {
    if (r.client === undefined || !nodes.has(r.client) || r.status < 200 || r.status > 299) continue;
    if (r.verb === undefined || !WRITES.has(r.verb) || r.resource === undefined) continue;
    const object = r.resource.split('/')[0] ?? r.resource;
    changes.set(object, (changes.get(object) ?? 0) + 1);
  }
  const delivered = new Map<string, number>();
  const reached = new Map<string, Set<string>>();
  for (const e of events) {
    if (e.client === undefined || !nodes.has(e.client) || e.type === 'BOOKMARK' || e.count === 0) continue;
    delivered.set(e.resource, (delivered.get(e.resource) ?? 0) + e.count);
    reached.set(e.resource, (reached.get(e.resource) ?? new Set()).add(e.client));
  }
  const resources = [...new Set([...changes.keys(), ...delivered.keys()])].sort();
  return new Map(
    resources.map((resource) => [
      resource,
      {
        changes: changes.get(resource) ?? 0,
        delivered: delivered.get(resource) ?? 0,
        nodesReached: reached.get(resource)?.size ?? 0,
      },
    ]),
  );
}

/**
 * The fan-out as lines, one per resource: its changes, the events delivered per change (and per
 * `operations`, the ADDs and DELs of a churn, when given), the nodes any event reached.
 */
export function describeFanOut(c: WindowCounts, operations?: number): string {
  const lines = [
    c.eventsCounted
      ? 'fan-out of the changes (watch events delivered to the nodes, BOOKMARKs apart), by resource:'
      : 'the changes, by resource (watch events not counted: the nodes count requests only):',
  ];
  for (const [resource, f] of c.fanOut) {
    const perChange = f.changes === 0 ? '–' : fixed(f.delivered / f.changes);
    const perOperation =
      operations === undefined || operations === 0 ? '' : `, ${fixed(f.delivered / operations)} per ADD/DEL`;
    lines.push(
      `  ${resource.padEnd(32)} ${String(f.changes).padStart(6)} changes, ${String(f.delivered).padStart(7)} events` +
        ` (${perChange} per change${perOperation}), to ${f.nodesReached} of ${c.nodes} nodes`,
    );
  }
  if (c.fanOut.size === 0) lines.push('  none');
  return lines.join('\n');
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
  const shown = !c.eventsCounted ? 'not counted (the nodes count requests only)' : events === '' ? 'none' : events;
  lines.push(`watch events delivered to the nodes: ${shown}`);
  return lines.join('\n');
}
