/**
 * The soak's independent auditor. Its verdicts rest on what is outside Warren's bookkeeping: the
 * workload's ground truth (which sandbox the harness believes holds which address, which are
 * proven gone and since when) and each node's SQLite file, opened read-only for every look (never
 * the agent's API, never its logs). It checks, after every step and at the end:
 * - no address held by two live sandboxes of one node (each node's file is its own address space),
 *   or of any nodes when they share one range (a cluster store: `sharedRange`);
 * - no live sandbox's record gone from its node's file, or holding another address than its ADD said
 *   (but one whose file was put back and whose store writes it back at the start: `returning`,
 *   until it is back; at the end, every one is back);
 * - every sandbox proven gone released (its record gone from the file), measured as the time an
 *   agent of its node ran between the proof and the first look that finds its record gone (the
 *   node's downtime is the fault's, not the agent's; the wall-clock figure is reported beside it);
 *   at the end, none still held and none over the bound;
 * - no operation lost (the harness reports ADDs with neither an address nor a CNI error, DELs that
 *   never succeeded: `lost()`);
 * - at the end, no record in any file but a live sandbox's (nothing leaked);
 * - what a cluster store's own look at its objects found (`report()`, store.ts `auditCluster`).
 *
 * A look is a poll: a release is seen at most one poll interval (plus a step) late, which the
 * latency figures include.
 */
import { DatabaseSync } from 'node:sqlite';
import { existsSync } from 'node:fs';
import { type GroundTruth, PROOF_SOURCES, type ProofSource, type Sandbox, releasedInCluster } from './ground-truth.ts';

/** What the auditor needs of a node: its file, and when an agent of it ran (soak-node.ts). */
export interface AuditedNode {
  readonly index: number;
  readonly name: string;
  readonly database: string;
  /** True while its state directory is being copied or put back. */
  readonly busy: boolean;
  /** How long an agent of the node ran within [from, to] (ms). */
  runningMs(from: number, to: number): number;
}

export interface Violation {
  readonly step: number;
  readonly what: string;
}

export interface LatencyFigures {
  readonly source: ProofSource;
  readonly count: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** The longest on the wall clock, the node's downtime included. */
  readonly wallMaxMs: number;
}

/** container ID → address, as one node's file holds them now; undefined when the file cannot be read. */
export function readRecords(database: string): Map<string, string> | undefined {
  if (!existsSync(database)) return new Map();
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(database, { readOnly: true, timeout: 1_000 });
    const rows = db.prepare('SELECT container_id, address FROM allocations').all() as Array<{
      container_id: string;
      address: string;
    }>;
    return new Map(rows.map((r) => [r.container_id, r.address]));
  } catch {
    return undefined; // busy past the timeout, or mid-creation: the next look reads it
  } finally {
    db?.close();
  }
}

export interface AuditorOptions {
  /** Every node hands out addresses of one range: two live sandboxes on one address anywhere are a duplicate. */
  readonly sharedRange?: boolean;
}

export class Auditor {
  readonly #nodes: readonly AuditedNode[];
  readonly #truth: GroundTruth;
  readonly #boundMs: number;
  readonly #sharedRange: boolean;
  readonly violations: Violation[] = [];
  /** Things reported once (a live sandbox missing stays missing): the key of each. */
  readonly #reported = new Set<string>();
  step = 0;
  /** Looks at a node's file, and those that could not read it (busy past the timeout): a look skipped checks nothing. */
  looks = 0;
  unreadable = 0;

  constructor(nodes: readonly AuditedNode[], truth: GroundTruth, boundMs: number, options: AuditorOptions = {}) {
    this.#nodes = nodes;
    this.#truth = truth;
    this.#boundMs = boundMs;
    this.#sharedRange = options.sharedRange ?? false;
  }

  /** A violation found elsewhere (the cluster's objects), reported once per key. */
  report(key: string, what: string): void {
    this.#violation(`cluster ${key}`, what);
  }

  #violation(key: string, what: string): void {
    if (this.#reported.has(key)) return;
    this.#reported.add(key);
    this.violations.push({ step: this.step, what });
  }

  /** Every check that holds at any moment, on every node's file. */
  check(): void {
    const now = Date.now();
    if (this.#sharedRange) this.#duplicates('all nodes', this.#truth.all());
    for (const node of this.#nodes) {
      if (node.busy) continue;
      const records = readRecords(node.database);
      this.looks += 1;
      if (records === undefined) this.unreadable += 1;
      const sandboxes = this.#truth.on(node.index);
      if (!this.#sharedRange) this.#duplicates(node.name, sandboxes);
      if (records === undefined) continue;
      for (const s of sandboxes) this.#judge(node, s, records, now);
    }
  }

  /** Two live sandboxes among `sandboxes` (one address space, `where`) on one address. */
  #duplicates(where: string, sandboxes: readonly Sandbox[]): void {
    const holders = new Map<string, string[]>();
    for (const s of sandboxes) {
      if (s.state !== 'live' || s.address === undefined) continue;
      holders.set(s.address, [...(holders.get(s.address) ?? []), s.id]);
    }
    for (const [address, ids] of holders)
      if (ids.length > 1)
        this.#violation(
          `dup ${where} ${address} ${ids}`,
          `${where}: ${address} held by live sandboxes ${ids.join(', ')}`,
        );
  }

  #judge(node: AuditedNode, s: Sandbox, records: Map<string, string>, now: number): void {
    const record = records.get(s.id);
    if (record !== undefined) {
      s.held = true;
      delete s.returning;
    }
    if (s.state === 'live') {
      if (record === undefined && s.returning === true) return;
      if (record === undefined)
        this.#violation(`released ${s.id}`, `${node.name}: live sandbox ${s.id}'s ${s.address} is gone from the file`);
      else if (record !== s.address)
        this.#violation(
          `moved ${s.id}`,
          `${node.name}: live sandbox ${s.id} holds ${record} in the file, its ADD said ${s.address}`,
        );
      return;
    }
    if (s.state !== 'gone' || s.releasedAt !== undefined || record !== undefined) return;
    if (releasedInCluster(s)) return; // its node lost: the harness judges it in the cluster
    s.releasedAt = now;
  }

  /** Sandboxes proven gone whose records are still held. */
  unreleased(): Sandbox[] {
    return this.#truth.all().filter((s) => s.state === 'gone' && s.releasedAt === undefined);
  }

  /**
   * The release latency of one sandbox: how long an agent of its node ran between its proof and
   * the look that saw its record gone (a node's downtime is not the agent's delay; a release that
   * waits across kills and restarts adds up the agents' running time).
   */
  latencyOf(s: Sandbox): number | undefined {
    if (s.goneAt === undefined || s.releasedAt === undefined || !s.held || s.lostWithDisk === true) return undefined;
    // Its node lost: any other node's agent frees its blocks, so the wall clock from the forget.
    if (releasedInCluster(s)) return s.releasedAt - s.goneAt;
    return (this.#nodes[s.node] as AuditedNode).runningMs(s.goneAt, s.releasedAt);
  }

  /** The same on the wall clock, downtime included. */
  wallLatencyOf(s: Sandbox): number | undefined {
    if (s.goneAt === undefined || s.releasedAt === undefined || !s.held || s.lostWithDisk === true) return undefined;
    return s.releasedAt - s.goneAt;
  }

  /** The end: every gone sandbox released within the bound, nothing in any file but live sandboxes. */
  final(): void {
    for (const s of this.unreleased())
      this.#violation(`unreleased ${s.id}`, `sandbox ${s.id} (gone by ${s.source}) still held at the end`);
    for (const s of this.#truth.all())
      if (s.state === 'live' && s.returning === true)
        this.#violation(
          `not back ${s.id}`,
          `live sandbox ${s.id}'s ${s.address} never came back to its node's file after the file was put back`,
        );
    for (const s of this.#truth.all()) {
      const latency = this.latencyOf(s);
      if (latency !== undefined && latency > this.#boundMs)
        this.#violation(
          `slow ${s.id}`,
          `sandbox ${s.id} (gone by ${s.source}) released ${latency} ms after provable (bound ${this.#boundMs} ms)`,
        );
    }
    for (const node of this.#nodes) {
      const records = readRecords(node.database);
      if (records === undefined) {
        this.#violation(`unreadable ${node.index}`, `${node.name}: its file could not be read at the end`);
        continue;
      }
      for (const [id, address] of records) {
        const s = this.#truth.get(id);
        if (s?.state !== 'live')
          this.#violation(
            `leak ${id}`,
            `${node.name}: ${address} held by ${id} (${s?.state ?? 'unknown to the workload'}) at the end`,
          );
      }
    }
  }

  /** p50, p99 and max per source, over the sandboxes whose release was measured. */
  latencies(): LatencyFigures[] {
    const bySource = new Map<ProofSource, number[]>();
    const wallMax = new Map<ProofSource, number>();
    for (const s of this.#truth.all()) {
      const latency = this.latencyOf(s);
      if (latency === undefined || s.source === undefined) continue;
      bySource.set(s.source, [...(bySource.get(s.source) ?? []), latency]);
      wallMax.set(s.source, Math.max(wallMax.get(s.source) ?? 0, this.wallLatencyOf(s) ?? 0));
    }
    return PROOF_SOURCES.filter((source) => bySource.has(source)).map((source) => {
      const values = (bySource.get(source) as number[]).sort((a, b) => a - b);
      const at = (q: number) => values[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)] as number;
      return {
        source,
        count: values.length,
        p50Ms: at(0.5),
        p99Ms: at(0.99),
        maxMs: values[values.length - 1] as number,
        wallMaxMs: wallMax.get(source) ?? 0,
      };
    });
  }

  /** An operation the harness saw lost (an ADD with no answer, a DEL that never succeeded). */
  lost(what: string): void {
    this.violations.push({ step: this.step, what: `operation lost: ${what}` });
  }
}
