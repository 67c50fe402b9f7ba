/**
 * What a soak node's agents said of their releases, read from their own log (pino JSON lines on
 * stdout) as it arrives: each line that says addresses were released (src/agent/release/log.ts,
 * `ReleaseLog.released`), with the source it names, the container or the addresses it names, the
 * agent's incarnation and when the harness read it; and where the running agent serves its metrics
 * (its 'metrics and dashboard served' line), so the auditor can read its release counter.
 *
 * The lines of a release, by source (the message and fields ReleaseLog writes):
 * - `missed delete released` with `released: [addresses]` non-empty: `journal` (a journaled DEL);
 * - `released: network namespace is gone` with `containerID` and `addresses`: `netns` (the sweep);
 * - `released` with `source` (containerd, plugin, kubernetes), `containerID` or `podUID`, and
 *   `addresses`: that source;
 * - the two-tier store's notice `file check: released the record of container C (ifname) at A ...`:
 *   `file-check` (a stale record of a file put back, replaced by the newer publication's holder).
 * A line that released nothing (`released: []`, a dropped journal file) explains nothing and is not
 * kept.
 *
 * Bounded: only release lines are kept, never the log itself; a line is removed when it explains a
 * release (`take`), and at most MAX_KEPT lines a node, the oldest dropped first. A line longer than
 * MAX_LINE_CHARS is skipped (pino writes one object a line; none of the release lines is long).
 */
import type { Readable } from 'node:stream';

export interface ReleaseLine {
  /** The agent incarnation that wrote it (soak-node.ts counts them). */
  readonly incarnation: number;
  /** When the harness read it (ms, the harness's clock: the agent's own may be stepped). */
  readonly arrivedAt: number;
  /**
   * The earliest it can have been written: `arrivedAt`, but for what an agent wrote before the
   * harness could listen (read at once when its start ends: written since its spawn).
   */
  readonly earliest: number;
  /** The source it names: journal, netns, containerd, plugin, kubernetes. */
  readonly source: string;
  readonly containerID?: string;
  readonly addresses: readonly string[];
}

/** At most this many unexplained release lines kept per node (the oldest go first). */
const MAX_KEPT = 20_000;
const MAX_LINE_CHARS = 64 * 1024;

/** The release a pino line says, or undefined when it says none. */
export function releaseOf(entry: unknown): Omit<ReleaseLine, 'incarnation' | 'arrivedAt' | 'earliest'> | undefined {
  if (typeof entry !== 'object' || entry === null) return undefined;
  const e = entry as Record<string, unknown>;
  const strings = (v: unknown): string[] =>
    Array.isArray(v) ? v.filter((a): a is string => typeof a === 'string') : [];
  const containerID = typeof e.containerID === 'string' ? { containerID: e.containerID } : {};
  switch (e.msg) {
    case 'missed delete released': {
      const addresses = strings(e.released);
      return addresses.length === 0 ? undefined : { source: 'journal', addresses };
    }
    case 'released: network namespace is gone': {
      const addresses = strings(e.addresses);
      return addresses.length === 0 ? undefined : { source: 'netns', ...containerID, addresses };
    }
    case 'released': {
      const addresses = strings(e.addresses);
      if (addresses.length === 0 || typeof e.source !== 'string') return undefined;
      return { source: e.source, ...containerID, addresses };
    }
    default: {
      // The two-tier store's file check, releasing a stale record of a file gone back (its notice).
      const checked = typeof e.msg === 'string' ? FILE_CHECK_RELEASE.exec(e.msg) : null;
      if (checked === null) return undefined;
      return { source: 'file-check', containerID: checked[1] as string, addresses: [checked[2] as string] };
    }
  }
}

/** The file check's notice of a record it released (src/store/tiered/file-check.ts `#told`). */
const FILE_CHECK_RELEASE = /^file check: released the record of container (\S+) \(\S+\) at (\S+) /;

/** One node's release lines across its agents' incarnations, and where the running one serves metrics. */
export class AgentReleaseLog {
  #lines: ReleaseLine[] = [];
  /** The metrics address of each incarnation that said one. */
  readonly #metrics = new Map<number, string>();
  /** Lines dropped for the bound (reported: a release they explained would read as unexplained). */
  dropped = 0;

  /**
   * Reads an incarnation's log: what it wrote before the harness could listen (`backlog`: written
   * between its spawn at `startedAt` and now), then `stream` as it comes.
   */
  follow(incarnation: number, backlog: string, startedAt: number, stream: Readable | null): void {
    const now = Date.now();
    for (const line of backlog.split('\n')) this.read(incarnation, line, now, startedAt);
    if (stream === null) return;
    let partial = backlog.slice(backlog.lastIndexOf('\n') + 1);
    // The backlog's unfinished line was read as a line above only if it parsed; it is finished now.
    stream.on('data', (chunk: Buffer) => {
      const text = partial + chunk.toString();
      const lines = text.split('\n');
      partial = lines.pop() ?? '';
      if (partial.length > MAX_LINE_CHARS) partial = '';
      const now = Date.now();
      for (const line of lines) this.read(incarnation, line, now);
    });
  }

  /** One line of incarnation `incarnation`'s log, read at `at` and written no earlier than `earliest`. */
  read(incarnation: number, line: string, at: number, earliest = at): void {
    if (!line.startsWith('{') || line.length > MAX_LINE_CHARS) return;
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      return; // the backlog's unfinished last line: read whole from the stream
    }
    const e = entry as { msg?: unknown; address?: unknown };
    if (e.msg === 'metrics and dashboard served' && typeof e.address === 'string')
      this.#metrics.set(incarnation, e.address);
    const release = releaseOf(entry);
    if (release === undefined) return;
    this.#lines.push({ ...release, incarnation, arrivedAt: at, earliest: Math.min(earliest, at) });
    if (this.#lines.length > MAX_KEPT) {
      this.#lines.shift();
      this.dropped += 1;
    }
  }

  /**
   * Removes and returns the first line written within [from, to] (as far as its read can tell:
   * `earliest`..`arrivedAt`) that names `containerID`, or else `address` without naming another
   * container: the line that explains that release. A line found by one of several addresses it names
   * (the pod source's, for every sandbox of a pod) stays for the others, without that one (found by
   * the soak, kubernetes seed 3839: a pod's second sandbox's release taken for unexplained).
   */
  take(containerID: string, address: string | undefined, from: number, to: number): ReleaseLine | undefined {
    const within = (l: ReleaseLine) => l.arrivedAt >= from && l.earliest <= to;
    let at = this.#lines.findIndex((l) => within(l) && l.containerID === containerID);
    if (at < 0 && address !== undefined)
      at = this.#lines.findIndex(
        (l) =>
          within(l) && (l.containerID === undefined || l.containerID === containerID) && l.addresses.includes(address),
      );
    if (at < 0) return undefined;
    const found = this.#lines[at] as ReleaseLine;
    const rest = found.addresses.filter((a) => a !== address);
    if (
      found.containerID === undefined &&
      address !== undefined &&
      rest.length > 0 &&
      rest.length < found.addresses.length
    )
      this.#lines[at] = { ...found, addresses: rest };
    else this.#lines.splice(at, 1);
    return found;
  }

  /** Whether a line naming `containerID` was read at or after `from` (it stays to explain its release). */
  said(containerID: string, from: number): boolean {
    return this.#lines.some((l) => l.arrivedAt >= from && l.containerID === containerID);
  }

  /** Where incarnation `incarnation` serves its metrics, if it said. */
  metricsAddress(incarnation: number): string | undefined {
    return this.#metrics.get(incarnation);
  }
}

/** The sum of `warren_releases_total` over its sources in a Prometheus exposition. */
export function releasesCounted(exposition: string): number {
  let total = 0;
  for (const line of exposition.split('\n')) {
    const match = /^warren_releases_total(?:\{[^}]*\})?\s+(\S+)/.exec(line);
    if (match !== null) total += Number(match[1]);
  }
  return total;
}
