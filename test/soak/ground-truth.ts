/**
 * The workload's ground truth: every sandbox the harness created, which node and pod it is on,
 * the address its ADD answered, and when it was proven gone and how (its DEL answered by the
 * agent, its DEL journaled by the plugin, its netns removed, or its record brought back by a
 * restored state directory, or its node lost and forgotten). Written only by the harness from what
 * it did and what the plugin answered; never from Warren's store. A pod keeps its number (its name,
 * `pod-N`) across a StatefulSet re-creation, and gets a new UID at each (`podUid`).
 */

/** What proved a sandbox gone: the release's source, as the auditor reports latencies. */
/**
 * What proved a sandbox gone: the release's source, as the auditor reports latencies. `forget`: its
 * node lost and forgotten by the operator (its release is judged in the cluster, where another
 * node's agent frees the lost node's blocks, on the wall clock from the forget: `releasedInCluster`).
 */
export type ProofSource = 'del' | 'journal' | 'netns' | 'restored' | 'forget';

export const PROOF_SOURCES: readonly ProofSource[] = ['del', 'journal', 'netns', 'restored', 'forget'];

/** Whether a sandbox's release is judged in the cluster (its node lost), not in its node's file. */
export function releasedInCluster(sandbox: Sandbox): boolean {
  return sandbox.source === 'forget';
}

export type SandboxState =
  /** ADD sent, no answer yet. */
  | 'adding'
  /** ADD answered with an address; the sandbox runs with it. */
  | 'live'
  /** Proven gone; its address must be released. */
  | 'gone'
  /**
   * Its DEL failed on a full disk (the agent could not commit, the plugin could not journal): not
   * live any more, not proven gone yet; the runtime sends the DEL again once the disk has room.
   */
  | 'deleting';

export interface Sandbox {
  readonly id: string;
  readonly pod: number;
  /** The UID of the pod it was made for (a pod re-created has a new one). */
  readonly uid: string;
  readonly node: number;
  state: SandboxState;
  /** The address its ADD answered. */
  address?: string;
  /** When it was proven gone (ms since the epoch, the harness's clock). */
  goneAt?: number;
  source?: ProofSource;
  /** When the auditor first saw its record gone from its node's store after `goneAt`. */
  releasedAt?: number;
  /** Its record was seen in the store, or its ADD answered an address: its release is measured. */
  held: boolean;
  /**
   * Lost with its node's disk: ADDed after the copy that was put back, so its node's file never
   * held it after the restore. The harness tears it down (a SQLite node has no other copy of it).
   */
  lostWithDisk?: boolean;
  /**
   * Not in the file its node's agent starts on (a copy put back, an empty directory) but kept by the
   * store outside it (a cluster store's publication): its record is written back at the agent's
   * start, and is not judged until then (live: missing; gone: released). Cleared when the auditor
   * sees the record again.
   */
  returning?: boolean;
}

export class GroundTruth {
  readonly #sandboxes = new Map<string, Sandbox>();
  /** The pod's current sandbox (its newest), if it has one. */
  readonly #current = new Map<number, string>();
  /** Re-creations of each pod (none: its first UID). */
  readonly #generations = new Map<number, number>();
  #next = 0;

  /** The pod's UID now: `uid-N` until it is re-created, `uid-N-G` after its G-th re-creation. */
  podUid(pod: number): string {
    const generation = this.#generations.get(pod) ?? 0;
    return generation === 0 ? `uid-${pod}` : `uid-${pod}-${generation}`;
  }

  /** The pod made again under its name (a StatefulSet replica): a new UID; returns it. */
  recreated(pod: number): string {
    this.#generations.set(pod, (this.#generations.get(pod) ?? 0) + 1);
    return this.podUid(pod);
  }

  newSandbox(pod: number, node: number): Sandbox {
    const id = `p${pod}s${this.#next++}`;
    const sandbox: Sandbox = { id, pod, uid: this.podUid(pod), node, state: 'adding', held: false };
    this.#sandboxes.set(id, sandbox);
    this.#current.set(pod, id);
    return sandbox;
  }

  /** The pod's newest sandbox, whatever its state. */
  current(pod: number): Sandbox | undefined {
    const id = this.#current.get(pod);
    return id === undefined ? undefined : this.#sandboxes.get(id);
  }

  get(id: string): Sandbox | undefined {
    return this.#sandboxes.get(id);
  }

  all(): Sandbox[] {
    return [...this.#sandboxes.values()];
  }

  on(node: number): Sandbox[] {
    return this.all().filter((s) => s.node === node);
  }

  markLive(sandbox: Sandbox, address: string): void {
    sandbox.state = 'live';
    sandbox.address = address;
    sandbox.held = true;
  }

  markDeleting(sandbox: Sandbox): void {
    sandbox.state = 'deleting';
    delete sandbox.goneAt;
    delete sandbox.releasedAt;
  }

  markGone(sandbox: Sandbox, source: ProofSource, at: number): void {
    sandbox.state = 'gone';
    sandbox.source = source;
    sandbox.goneAt = at;
    delete sandbox.releasedAt;
  }

  /**
   * Nothing of `sandbox` is left to release (its record lost with its node's file and the store, or
   * never written back): released now, not measured. A live one is gone by `restored` first.
   */
  nothingLeft(sandbox: Sandbox, at: number): void {
    if (sandbox.state === 'live') this.markGone(sandbox, 'restored', at);
    delete sandbox.returning;
    sandbox.lostWithDisk = true;
    sandbox.releasedAt = at;
  }

  /**
   * Node `node`'s state directory put back from a copy holding `copy` (or deleted: an empty copy),
   * with `outside` what the store keeps of it outside the file (a cluster store's publications,
   * written back at the agent's start: docs/recovery.md), at `now`: the truth follows the file.
   * Returns the live sandboxes lost with the disk, for the harness to tear down (as a node rebooted
   * onto an old disk).
   */
  followPutBack(node: number, copy: ReadonlySet<string>, outside: ReadonlySet<string>, now: number): Sandbox[] {
    const lost: Sandbox[] = [];
    for (const s of this.on(node)) {
      const comesBack = copy.has(s.id) || outside.has(s.id);
      if (s.state === 'live' && !copy.has(s.id) && outside.has(s.id)) {
        s.returning = true; // its record is written back at the agent's start
      } else if (s.state === 'live' && !comesBack) {
        // ADDed after the copy: the restored file never held it, and nothing else knows it (on a
        // cluster store: not published yet). The node's runtime tears it down.
        this.nothingLeft(s, now);
        lost.push(s);
      } else if (s.state === 'gone' && comesBack) {
        this.markGone(s, 'restored', now); // its record is back: to be released again
        if (!copy.has(s.id)) s.returning = true; // once the agent wrote it back from the store
      } else if (s.state === 'gone' && s.returning === true && s.releasedAt === undefined) {
        // Owed since an earlier put-back, never written back (the file knew better), and the store
        // names it no more (published over from the file, its block given back): nothing of it is
        // left anywhere. Found by the soak, etcd seed 3943 step 17053: still owed, it was judged
        // from that earlier put-back when a restore of etcd brought its publication back 27 s later
        // and the agent wrote it back and released it at once (48.6 s "late").
        this.nothingLeft(s, now);
      }
    }
    return lost;
  }

  /**
   * Every sandbox of a forgotten node still owed its release, forgotten at or after `since` (and
   * before `now`), provable from `now`: no agent could act on its forget before (store.ts
   * StoreFaultContext.recovering).
   */
  forgetsProvableFrom(now: number, since = Number.NEGATIVE_INFINITY): void {
    for (const s of this.all()) {
      const goneAt = s.goneAt ?? now;
      if (s.state === 'gone' && s.source === 'forget' && s.releasedAt === undefined && goneAt < now && goneAt >= since)
        this.markGone(s, 'forget', now);
    }
  }
}
