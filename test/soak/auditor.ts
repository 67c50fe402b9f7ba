/**
 * The soak's independent auditor. Its verdicts rest on what is outside Warren's bookkeeping: the
 * workload's ground truth (which sandbox the harness believes holds which address, which are
 * proven gone and since when) and each node's SQLite file, opened read-only for every look (never
 * the agent's API; its logs only to judge a release explained, never whether one happened). It checks, after every step and at the end:
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
 * - what a cluster store's own look at its objects found (`report()`, store.ts `auditCluster`);
 * - every release it observes explained (where the node keeps a `witness`): for each sandbox proven
 *   gone whose record it saw held and then saw gone, one of
 *   - a release line of the node's agent naming the sandbox's container, or else its address
 *     without naming another container, with its source (agent-log.ts reads them from the agent's
 *     log: journal, netns, containerd, plugin, kubernetes), read after the proof and at most
 *     LATE_MS after the look that saw the record gone; each line explains one release;
 *   - the DEL the harness sent for it, at or after the proof, while an agent of its node ran or was
 *     starting (so could take it): a DEL is the runtime's own word and the agent logs none of its
 *     own (`warren_releases_total{source="cni-del"}` counts it); a DEL sent while no agent ran was
 *     journaled by the plugin, and its release must be the journal's line;
 *   - its node's file put back from an older copy between the last look that saw the record and
 *     the one that saw it gone (no agent released it: the copy never held it);
 *   - its node's agent killed -9 between those two looks, or within KILL_FLUSH_MS after (a release
 *     committed just before the kill may never reach the log: the agent logs asynchronously;
 *     counted apart in the figures, so a run shows how often);
 *   else "released without an explanation", once LATE_MS has passed (at the end, `agentsAtEnd`
 *   waits up to LATE_MS for the last lines). A sandbox torn down with its disk (`lostWithDisk`) was
 *   never released by an agent and is not judged.
 * - at the end (`agentsAtEnd`), each running agent's `warren_releases_total` (all sources) at
 *   least the releases observed that it explained (by its line, or a DEL sent to it): each agent
 *   counts from its start, and an agent killed takes its count along, so only the last one of each
 *   node is held to it. Where the agents write Events (the kubernetes store, its pod source on), the
 *   releases their lines explained are looked up among the release Events on the pods: a figure,
 *   not a violation (`#eventsAtEnd` says why).
 *
 * A look is a poll: a release is seen at most one poll interval (plus a step) late, which the
 * latency figures include.
 */
import { DatabaseSync } from 'node:sqlite';
import { existsSync } from 'node:fs';
import type { ReleaseLine } from './agent-log.ts';
import type { ReleaseEvent } from './release-events.ts';
import { EVENT_SEND_MS } from './event-losses.ts';
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
  /** What explains the node's releases; absent: they are not judged for an explanation. */
  readonly witness?: ReleaseWitness;
}

/** What a node keeps that explains a release (soak-node.ts). */
export interface ReleaseWitness {
  /** Removes and returns the agent's release line read within [from, to] naming the container, else the address. */
  take(containerID: string, address: string | undefined, from: number, to: number): ReleaseLine | undefined;
  /** Whether the agent's release line naming the container was read at or after `from` (not taken). */
  said(containerID: string, from: number): boolean;
  /** A DEL for the container sent at or after `since` while an agent ran or was starting. */
  delSent(containerID: string, since: number): { readonly at: number; readonly incarnation: number } | undefined;
  /** The container is judged: its DELs need not be kept. */
  forget(containerID: string): void;
  /** Whether the node's file was put back from a copy within [from, to]. */
  restoredWithin(from: number, to: number): boolean;
  /** Whether the node's agent was killed -9 within [from, to]. */
  killedWithin(from: number, to: number): boolean;
  /** True while an agent of the node starts: what it logs meanwhile is read when its start ends. */
  starting(): boolean;
  /** The running agent's incarnation and the sum of its release counter, or why it cannot be read. */
  releasesCounted(): Promise<{ readonly incarnation: number; readonly total: number } | string>;
  /** The release Events on the pods (release-events.ts), why they cannot be read, or undefined where none are written. */
  releaseEvents(): Promise<readonly ReleaseEvent[] | string | undefined>;
  /** Which fault may have taken a release Event written within [from, to] (event-losses.ts); undefined: none. */
  eventLostBy(from: number, to: number): string | undefined;
}

/** How long after the look that saw a release its agent's line may be read (the log is a pipe the harness reads between looks). */
export const LATE_MS = 10_000;
/** How long after a release a kill -9 of its agent may still take the release's line with it (ms). */
const KILL_FLUSH_MS = 1_000;
/** A release observed whose explanation is not found yet. */
interface UnexplainedRelease {
  readonly s: Sandbox;
  /** The address its record held in the file (else its ADD's). */
  readonly address: string | undefined;
  /** The look that saw its record gone, and the last that saw it held (ms). */
  readonly releasedAt: number;
  readonly lastHeld: number;
}

/** How often the end looks again for the lines of the last releases. */
const END_POLL_MS = 100;

/** How the releases observed were explained: by the source of the line, `del`, or `file put back`. */
export interface ExplanationFigures {
  readonly by: Readonly<Record<string, number>>;
  /** Each node's last agent: its release counter against the releases observed that it explained. */
  readonly counters: readonly string[];
  /** On the kubernetes store: the releases its agents logged that have their Event on the pod. */
  readonly events?: string;
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
  /** The last look that saw each sandbox's record (ms): a file put back after it explains its loss. */
  readonly #lastHeld = new Map<string, { readonly at: number; readonly address: string }>();
  /** Releases observed whose explanation is not found yet: judged each look, LATE_MS at most. */
  #unexplained: UnexplainedRelease[] = [];
  /** Explained releases by what explained them. */
  readonly #explainedBy: Record<string, number> = {};
  /** Releases each agent incarnation explained (node index → incarnation → count): its counter must say as many. */
  readonly #byIncarnation = new Map<number, Map<number, number>>();
  readonly #counters: string[] = [];
  /** Releases a line explained (the release pipeline's, which writes an Event on the pod where the store is Kubernetes'). */
  readonly #logged: Array<{
    readonly pod: string;
    readonly address: string;
    readonly id: string;
    readonly node: number;
    /** The span its release was committed in: last seen held, seen released (ms). */
    readonly from: number;
    readonly to: number;
  }> = [];
  #events: string | undefined;

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
    this.#explain(now, false);
  }

  /** The releases observed and not explained yet: explained now, or a violation once `final` or LATE_MS past. */
  #explain(now: number, final: boolean): void {
    this.#unexplained = this.#unexplained.filter((u) => {
      const node = this.#nodes[u.s.node] as AuditedNode;
      const witness = node.witness as ReleaseWitness;
      const explained = this.#explanationOf(witness, u);
      if (explained !== undefined) {
        this.#explainedBy[explained.by] = (this.#explainedBy[explained.by] ?? 0) + 1;
        if (explained.by.endsWith(' line') && u.address !== undefined)
          this.#logged.push({
            pod: `pod-${u.s.pod}`,
            address: u.address,
            id: u.s.id,
            node: u.s.node,
            from: u.lastHeld,
            to: u.releasedAt,
          });
        if (explained.incarnation !== undefined) {
          const counts = this.#byIncarnation.get(node.index) ?? new Map<number, number>();
          counts.set(explained.incarnation, (counts.get(explained.incarnation) ?? 0) + 1);
          this.#byIncarnation.set(node.index, counts);
        }
        witness.forget(u.s.id);
        return false;
      }
      if (!final && (now <= u.releasedAt + LATE_MS || witness.starting())) return true;
      const gone = u.s.goneAt ?? 0;
      this.#violation(
        `unexplained ${u.s.id} ${u.releasedAt}`,
        `${node.name}: sandbox ${u.s.id}'s ${u.address} (gone by ${u.s.source}; last seen held ` +
          `${u.lastHeld - gone} ms and seen released ${u.releasedAt - gone} ms after its proof) released without an explanation ` +
          '(no release line of its agent names it, no DEL was sent for it while an agent ran, its file was not put ' +
          'back, its agent was not killed)',
      );
      witness.forget(u.s.id);
      return false;
    });
  }

  /** What explains one release (see the header), and the incarnation whose counter counts it. */
  #explanationOf(
    witness: ReleaseWitness,
    { s, address, releasedAt, lastHeld }: UnexplainedRelease,
  ): { by: string; incarnation?: number } | undefined {
    const since = s.goneAt ?? 0;
    const until = releasedAt + LATE_MS;
    const own = witness.take(s.id, undefined, since, until);
    if (own !== undefined) return { by: `${own.source} line`, ...counted(own) };
    const del = witness.delSent(s.id, since);
    if (del !== undefined && del.at <= releasedAt) return { by: 'DEL', incarnation: del.incarnation };
    const line = witness.take(s.id, address, since, until);
    if (line !== undefined) return { by: `${line.source} line`, ...counted(line) };
    if (witness.restoredWithin(lastHeld, releasedAt)) return { by: 'file put back' };
    // Committed, then killed before the line was written: the kill is the harness's own act.
    // Or just after: the agent logs asynchronously (pino), so a line still in its buffer dies with a
    // kill -9 that comes within KILL_FLUSH_MS of the release (seed 3801: a kill 20 ms after it).
    if (witness.killedWithin(lastHeld, releasedAt + KILL_FLUSH_MS)) return { by: 'agent killed before its line' };
    return undefined;
  }

  /**
   * After `final`: the releases not explained yet given up to `waitMs` for their lines, then judged;
   * each node's running agent's release counter against the releases observed that
   * it explained (a counter that cannot be read is said in the figures, not a violation), and where
   * the agents write Events, the releases they logged against the Events on the pods (a figure).
   */
  async agentsAtEnd(waitMs = LATE_MS): Promise<void> {
    // The last looks' releases: their lines may still be in the pipe, read between looks.
    const deadline = Date.now() + waitMs;
    while (this.#unexplained.length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, END_POLL_MS));
      this.#explain(Date.now(), false);
    }
    this.#explain(Date.now(), true);
    await this.#countersAtEnd();
    await this.#eventsAtEnd();
  }

  async #countersAtEnd(): Promise<void> {
    for (const node of this.#nodes) {
      if (node.witness === undefined) continue;
      const counted = await node.witness.releasesCounted();
      if (typeof counted === 'string') {
        this.#counters.push(`${node.name}: not read (${counted})`);
        continue;
      }
      const observed = this.#byIncarnation.get(node.index)?.get(counted.incarnation) ?? 0;
      this.#counters.push(
        `${node.name}: its last agent counted ${counted.total} releases; ${observed} observed were its`,
      );
      if (counted.total < observed)
        this.#violation(
          `counter ${node.index}`,
          `${node.name}: its agent's warren_releases_total says ${counted.total}, but ${observed} of its releases were observed`,
        );
    }
  }

  /**
   * The releases a line explained, against the release Events on their pods. A figure, not a
   * violation: an Event is a report the agent never waits on (src/agent/kubernetes/events.ts), and
   * the soak injects each way one is lost — sent while the API server is stopped (dropped), written
   * after the snapshot its etcd is restored to (gone with it), in flight when its connections are
   * cut, or not sent yet when its agent is killed. Each missing Event is put down to the fault whose
   * span its sending falls in (event-losses.ts); those none explains (over the rate limit, or never
   * sent) are counted apart and named.
   */
  async #eventsAtEnd(): Promise<void> {
    const witness = this.#nodes.find((n) => n.witness !== undefined)?.witness;
    const events = await witness?.releaseEvents();
    if (events === undefined) return;
    if (typeof events === 'string') {
      this.#events = `not read (${events})`;
      return;
    }
    const missing = this.#logged.filter((r) => !events.some((e) => e.pod === r.pod && e.addresses.includes(r.address)));
    const lostBy: Record<string, number> = {};
    const unexplained: typeof missing = [];
    for (const r of missing) {
      const by = this.#nodes[r.node]?.witness?.eventLostBy(r.from, r.to + EVENT_SEND_MS);
      if (by === undefined) unexplained.push(r);
      else lostBy[by] = (lostBy[by] ?? 0) + 1;
    }
    const named = (rs: typeof missing) => rs.slice(0, 5).map((r) => `${r.id} (${r.pod} ${r.address})`);
    const said = [
      `${this.#logged.length - missing.length} of the ${this.#logged.length} releases its agents logged have their Event on the pod`,
    ];
    if (missing.length > 0) {
      const taken = Object.entries(lostBy).sort(([, a], [, b]) => b - a);
      said.push(`${missing.length} missing, taken by: ${taken.map(([by, n]) => `${by} ${n}`).join(', ') || 'none'}`);
      said.push(
        `${unexplained.length} explained by no fault${unexplained.length === 0 ? '' : `: ${named(unexplained).join(', ')}`}`,
      );
    }
    this.#events = said.join('; ');
  }

  /** How the releases observed were explained, and what the counters and Events said (`agentsAtEnd`). */
  explanations(): ExplanationFigures {
    return {
      by: { ...this.#explainedBy },
      counters: [...this.#counters],
      ...(this.#events === undefined ? {} : { events: this.#events }),
    };
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
      if (node.witness !== undefined) this.#lastHeld.set(s.id, { at: now, address: record });
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
    // Written back at its agent's start: released once seen again and gone, or once its agent's line
    // says so (written back and released between two looks, as a start's reconcile pass does).
    if (s.returning === true && node.witness?.said(s.id, s.goneAt ?? 0) === false) return;
    delete s.returning;
    s.releasedAt = now;
    if (node.witness === undefined || !s.held || s.lostWithDisk === true) return;
    // The address its record held in the file (an ADD killed before its answer leaves none in the truth).
    const last = this.#lastHeld.get(s.id);
    const address = last?.address ?? s.address;
    this.#unexplained.push({ s, address, releasedAt: now, lastHeld: last?.at ?? 0 });
    this.#lastHeld.delete(s.id);
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
    // Kept by the store, but never written back to its node's file (the file knew better: newer than
    // the publication that still named it): its node never held it again, so nothing is left to release.
    for (const s of this.#truth.all())
      if (s.state === 'gone' && s.returning === true && s.releasedAt === undefined)
        this.#truth.nothingLeft(s, Date.now());
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

/**
 * The incarnation whose `warren_releases_total` counts a release its line explained. The file
 * check's line counts in none: it replaced a stale record of a file put back by the holder the
 * newer publication names, so the address stayed in use and no release is counted (found by the
 * soak, etcd seed 3943 at step 1600: a node's state put back six steps before the end).
 */
function counted(line: { readonly source: string; readonly incarnation: number }): { incarnation?: number } {
  return line.source === 'file-check' ? {} : { incarnation: line.incarnation };
}
