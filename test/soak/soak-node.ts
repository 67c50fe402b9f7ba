/**
 * One node of the soak: a real agent process on its own state directory and SQLite file, on the
 * run's store (store.ts: its flags, and the network name and range it gives the node: the node's
 * own on SQLite, one shared by all on a cluster store), and its own netns directory, a private tmpfs mount (so the agent's
 * observer, which judges only mount points, may judge it) holding one plain file per sandbox: a
 * file removed is a namespace gone, as `ip netns del` makes it. Faults act on the process (kill -9,
 * SIGTERM), on its state directory (copied and put back only while the agent is stopped; a tmpfs
 * of its own, which a fault fills to the last byte and frees: disk-ballast.ts) and on its wall
 * clock (stepped under the agent and the plugin: wall-clock.ts).
 *
 * What the auditor needs to judge whether a release is explained (`witness`, auditor.ts): each
 * agent's release lines read from its log as they arrive (agent-log.ts: only those lines are kept),
 * the DELs sent to the node and whether an agent ran or was starting then (one that could take
 * it), the times its file was put back from a copy and its agent killed -9, the running agent's
 * release counter read from its metrics endpoint, and on the kubernetes store the release Events
 * on the pods.
 *
 * Cleanup: the agent is killed by PID, the mount unmounted and the directories removed by
 * `close()`, and by a process exit handler if the run never gets there.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, createWriteStream, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { type CniReply, warren } from '../helpers/cni.ts';
import { tempDir } from '../helpers/processes.ts';
import { AgentReleaseLog, releasesCounted } from './agent-log.ts';
import type { ReleaseWitness } from './auditor.ts';
import { type ReleaseEvent, readReleaseEvents } from './release-events.ts';
import { STATE_DISK_SIZE, fillDisk, freeDisk, isBallast } from './disk-ballast.ts';
import type { SoakStore } from './store.ts';
import { SteppedWallClock } from './wall-clock.ts';

/** How the agents judge namespaces: how often they sweep, and how long a new allocation is spared (unset: the agent's defaults). */
export interface ReleaseSettings {
  readonly reconcileIntervalSeconds?: number;
  readonly netnsGraceSeconds?: number;
  /** Where each agent's whole log is kept (`--keep-logs`), a file per node appended by each start. */
  readonly logsDir?: string;
}

/** How long a refused start is retried, from the first spawn (ms): the lease and the ping, with room. */
const REFUSED_START_BOUND_MS = 60_000;
/** Copies of a state directory tried before a file vanishing mid-copy fails the run. */
const COPY_TRIES = 5;
/** The pause before a refused agent is started again (ms), as a runtime's restart backoff. */
const RESTART_BACKOFF_MS = 1_000;
/** The namespace of every pod the node's CNI calls name (K8S_POD_NAMESPACE). */
const POD_NAMESPACE = 'soak';

/** Each node's mounts (netns, state) → the node's directory, all removed at exit if `close()` never ran. */
const mounted = new Map<string, string>();
process.on('exit', () => {
  // Every mount first: a node's directory cannot be removed while one of its mounts stands.
  for (const mount of mounted.keys()) spawnSync('umount', ['-l', mount]);
  // The helpers' own cleanup ran first and could not remove the mount points while mounted.
  for (const root of new Set(mounted.values())) rmSync(root, { recursive: true, force: true });
});

export class SoakNode {
  readonly index: number;
  readonly name: string;
  readonly network: string;
  readonly range: string;
  /** More fields of the network config's `ipam`, as the store gives them. */
  readonly #ipam: Readonly<Record<string, unknown>>;
  readonly stateDir: string;
  readonly netnsDir: string;
  readonly #root: string;
  readonly #settings: ReleaseSettings;
  readonly #store: SoakStore;
  #agent: AgentHandle | undefined;
  /** Bumped at every start: a call that saw another incarnation end raced a fault. */
  #incarnation = 0;
  /** Every span the agent ran (ms, the harness's clock; `end` absent while it runs). */
  readonly upSpans: Array<{ start: number; end?: number }> = [];
  #copies: string[] = [];
  #calls = 0;
  /** Whether the harness wants the agent running (started, and not killed or stopped since). */
  #wanted = false;

  get wanted(): boolean {
    return this.#wanted;
  }

  /** The agent's exits nobody asked for (not a kill or stop of the harness), with its log's end. */
  readonly crashes: Array<{ at: number; what: string; log: string }> = [];
  /** Starts the agent refused because its node's name was still announced (retried): see `start`. */
  startsRefused = 0;
  /** True while the state directory is being copied or put back: nobody reads it then. */
  busy = false;
  /** The node's wall clock, as its processes see it. */
  readonly clock: SteppedWallClock;
  /** While the disk is full: the DELs that failed on it, sent again once it has room. */
  #full: Array<() => Promise<void>> | undefined;
  /** True from the spawn until the agent answers: a DEL sent then may reach it. */
  #starting = false;
  /**
   * True from a stop's SIGTERM to the agent's exit: it still answers what reaches it meanwhile. A DEL
   * sent then was taken for one sent to no agent, and its release, by the stopping agent, for
   * unexplained (kubernetes seed 3839 step 1515, with a node's restart run beside the steps).
   */
  #stopping = false;
  /** The agents' release lines, read from their logs as they arrive. */
  readonly releaseLog = new AgentReleaseLog();
  /** The DELs sent, by container: when, to which incarnation, and whether an agent could take it. */
  readonly #dels = new Map<string, Array<{ at: number; incarnation: number; reachable: boolean }>>();
  /** When the file was put back from a copy (the records it lost were not released by an agent). */
  readonly #restores: number[] = [];
  /** Each kill -9, from the signal to the process gone: a release committed then may never be logged. */
  readonly #kills: Array<{ readonly from: number; readonly to: number }> = [];
  /** What the auditor reads to judge a release explained (auditor.ts `ReleaseWitness`). */
  readonly witness: ReleaseWitness = {
    take: (containerID, address, from, to) => this.releaseLog.take(containerID, address, from, to),
    said: (containerID, from) => this.releaseLog.said(containerID, from),
    delSent: (containerID, since) => this.#dels.get(containerID)?.find((d) => d.reachable && d.at >= since),
    forget: (containerID) => this.#dels.delete(containerID),
    restoredWithin: (from, to) => this.#restores.some((at) => at >= from && at <= to),
    killedWithin: (from, to) => this.#killedWithin(from, to),
    starting: () => this.#starting,
    releasesCounted: () => this.#releasesCounted(),
    releaseEvents: () => this.#releaseEvents(),
    eventLostBy: (from, to) =>
      this.#store.eventLostBy?.(from, to) ?? (this.#killedWithin(from, to) ? 'its agent killed' : undefined),
  };

  /** Whether the agent was killed -9 within [from, to] (ms). */
  #killedWithin(from: number, to: number): boolean {
    return this.#kills.some((k) => k.to >= from && k.from <= to);
  }

  constructor(index: number, store: SoakStore, settings: ReleaseSettings) {
    this.index = index;
    this.name = `soak-node-${index}`;
    const network = store.network(index);
    this.network = network.name;
    this.range = network.range;
    this.#ipam = network.ipam ?? {};
    this.#settings = settings;
    this.#store = store;
    this.#root = tempDir('warren-soak-');
    this.stateDir = join(this.#root, 'state');
    this.netnsDir = join(this.#root, 'netns');
    mkdirSync(this.stateDir, { mode: 0o700 });
    mkdirSync(this.netnsDir);
    this.#mount(this.netnsDir, 'size=4m,mode=0755');
    this.#mount(this.stateDir, `size=${STATE_DISK_SIZE},mode=0700`);
    this.clock = new SteppedWallClock(this.#root);
  }

  #mount(dir: string, options: string): void {
    const r = spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`mount tmpfs on ${dir} failed: ${r.stderr}`);
    mounted.set(dir, this.#root);
  }

  /** Fills the node's disk to the last byte (the agent's next write fails). */
  fillDisk(): void {
    if (this.#full !== undefined) return;
    fillDisk(this.stateDir);
    this.#full = [];
  }

  get diskFull(): boolean {
    return this.#full !== undefined;
  }

  /** A DEL that failed on the full disk: sent again when it is freed (as kubelet retries it). */
  retryWhenFreed(del: () => Promise<void>): void {
    if (this.#full === undefined) throw new Error(`${this.name}: a DEL parked while the disk has room`);
    this.#full.push(del);
  }

  /** Frees the node's disk; returns the DELs to send again. */
  freeDisk(): Array<() => Promise<void>> {
    freeDisk(this.stateDir);
    const parked = this.#full ?? [];
    this.#full = undefined;
    return parked;
  }

  get database(): string {
    return join(this.stateDir, 'warren.db');
  }

  get incarnation(): number {
    return this.#incarnation;
  }

  get isUp(): boolean {
    return this.#agent !== undefined;
  }

  get socket(): string {
    return join(this.stateDir, 'warren.sock');
  }

  /** The agent's log across its incarnations is not kept; this is the running one's. */
  log(): string {
    return this.#agent?.log() ?? '';
  }

  async start(): Promise<void> {
    this.#wanted = true;
    if (this.#agent !== undefined) return;
    // From the spawn: what an agent does before it answers (the journal's drain) counts as its time.
    const spawned = Date.now();
    for (;;) {
      this.#starting = true;
      try {
        const agent = await this.#spawn();
        this.#agent = agent;
        agent.child.once('exit', (code, signal) => {
          if (this.#agent !== agent) return; // stopped or killed by the harness
          // An exit nobody asked for: the agent died by itself. Reported, and its span ends here.
          this.crashes.push({ at: Date.now(), what: `exit ${code ?? signal}`, log: agent.log().slice(-3_000) });
          this.#ended();
        });
        break;
      } catch (error) {
        // On a cluster store, an agent started on a state directory put back from an older copy
        // does not know the instance that announced the node last, and refuses while that
        // announcement's lease runs: the runtime restarts it (a DaemonSet's crash loop).
        const message = (error as Error).message;
        const refused = /ALREADY_RUNNING: node \S+ is already announced/.test(message);
        // One that exited by itself before it served is a defect: reported as a crash (the auditor's
        // violation), and started again as the runtime would, so the run goes on to its verdict.
        const died = !refused && /the agent did not start: agent exited/.test(message);
        if ((!refused && !died) || Date.now() - spawned > REFUSED_START_BOUND_MS) throw error;
        // What it released before it refused is in the log the error carries (its start and end).
        this.releaseLog.follow(this.#incarnation + 1, message, spawned, null);
        if (died) this.crashes.push({ at: Date.now(), what: 'exited before it served', log: message.slice(-3_000) });
        else this.startsRefused += 1;
        this.#starting = false; // the refused agent has exited: a DEL now is journaled
        await new Promise((resolve) => setTimeout(resolve, RESTART_BACKOFF_MS));
      } finally {
        if (this.#agent === undefined) this.#starting = false;
      }
    }
    this.#starting = false;
    this.#incarnation += 1;
    this.upSpans.push({ start: spawned });
    const agent = this.#agent;
    // What it logged before this line ran arrived since the spawn; the rest is read as it comes.
    if (agent !== undefined) this.releaseLog.follow(this.#incarnation, agent.log(), spawned, agent.child.stdout);
    if (agent !== undefined && this.#settings.logsDir !== undefined) {
      const file = createWriteStream(join(this.#settings.logsDir, `${this.name}.log`), { flags: 'a' });
      file.write(`--- start ${this.#incarnation} at ${new Date(spawned).toISOString()} ---\n${agent.log()}`);
      agent.child.stdout?.pipe(file);
    }
  }

  /**
   * The release Events in the pods' namespace, read through the node's kubeconfig where its agent
   * runs the Kubernetes pod source (the one that writes them); undefined where it does not.
   */
  async #releaseEvents(): Promise<readonly ReleaseEvent[] | string | undefined> {
    const args = this.#store.agentArgs(this);
    const kubeconfig = args[args.indexOf('--kubeconfig') + 1];
    if (!args.includes('--kubeconfig') || kubeconfig === undefined || args[args.indexOf('--kubernetes') + 1] !== 'on')
      return undefined;
    try {
      return await readReleaseEvents(kubeconfig, POD_NAMESPACE);
    } catch (error) {
      return `the Events could not be read: ${(error as Error).message}`;
    }
  }

  /** The running agent's incarnation and the sum of its `warren_releases_total`, or why it cannot be read. */
  async #releasesCounted(): Promise<{ incarnation: number; total: number } | string> {
    if (this.#agent === undefined) return 'its agent is not running';
    const incarnation = this.#incarnation;
    const address = this.releaseLog.metricsAddress(incarnation);
    if (address === undefined) return 'its agent never said where it serves metrics';
    try {
      const reply = await fetch(`http://${address}/metrics`, { signal: AbortSignal.timeout(10_000) });
      if (!reply.ok) return `its metrics endpoint answered ${reply.status}`;
      return { incarnation, total: releasesCounted(await reply.text()) };
    } catch (error) {
      return `its metrics endpoint could not be read: ${(error as Error).message}`;
    }
  }

  #spawn(): Promise<AgentHandle> {
    return startAgent({
      dir: this.stateDir,
      args: [
        '--node-name',
        this.name,
        '--netns-dirs',
        this.netnsDir,
        ...(this.#settings.netnsGraceSeconds === undefined
          ? []
          : ['--netns-grace', String(this.#settings.netnsGraceSeconds)]),
        ...(this.#settings.reconcileIntervalSeconds === undefined
          ? []
          : ['--reconcile-interval', String(this.#settings.reconcileIntervalSeconds)]),
        ...this.#store.agentArgs(this),
      ],
      env: { ...this.#store.agentEnv(this), ...this.clock.env() },
    });
  }

  #ended(): void {
    this.#agent = undefined;
    this.#incarnation += 1;
    const span = this.upSpans[this.upSpans.length - 1];
    if (span !== undefined && span.end === undefined) span.end = Date.now();
  }

  /** How long an agent of this node ran within [from, to] (ms): the time it had to act. */
  runningMs(from: number, to: number): number {
    let total = 0;
    for (const span of this.upSpans) total += Math.max(0, Math.min(to, span.end ?? to) - Math.max(from, span.start));
    return total;
  }

  /** kill -9, and wait until the process is gone. */
  async kill(): Promise<void> {
    this.#wanted = false;
    const agent = this.#agent;
    if (agent === undefined) return;
    const from = Date.now();
    this.#ended();
    await agent.kill();
    this.#kills.push({ from, to: Date.now() });
  }

  /** SIGTERM and wait for the exit (a hang is killed and thrown by the helper). */
  async stop(): Promise<void> {
    this.#wanted = false;
    const agent = this.#agent;
    if (agent === undefined) return;
    this.#ended();
    this.#stopping = true;
    try {
      await agent.stop();
    } finally {
      this.#stopping = false;
    }
  }

  /** A copy of the stopped agent's state directory (database, WAL, journal), as a backup takes it. */
  copyState(): string {
    if (this.#agent !== undefined) throw new Error(`${this.name}: copy-state while the agent runs`);
    const copy = join(this.#root, `copy-${this.#copies.length}`);
    this.busy = true;
    try {
      // The agent is stopped, but the plugin journals the DELs sent meanwhile into the directory
      // (a temporary file, renamed into place): a file gone between the listing and its copy is
      // one of those, and the copy is taken again, as a backup tool retries a file that vanished.
      for (let attempt = 1; ; attempt++) {
        try {
          cpSync(this.stateDir, copy, {
            recursive: true,
            filter: (src) => !src.endsWith('.sock') && !isBallast(basename(src)),
          });
          break;
        } catch (error) {
          rmSync(copy, { recursive: true, force: true });
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= COPY_TRIES) throw error;
        }
      }
    } finally {
      this.busy = false;
    }
    this.#copies.push(copy);
    return copy;
  }

  /** The newest copy's path, or undefined when none was taken. */
  get newestCopy(): string | undefined {
    return this.#copies[this.#copies.length - 1];
  }

  /** Replaces the stopped agent's state directory by its newest copy. */
  restoreState(): void {
    const copy = this.newestCopy;
    if (this.#agent !== undefined) throw new Error(`${this.name}: restore-state while the agent runs`);
    if (copy === undefined) throw new Error(`${this.name}: restore-state with no copy`);
    this.busy = true;
    try {
      for (const entry of readdirSync(this.stateDir))
        rmSync(join(this.stateDir, entry), { recursive: true, force: true });
      cpSync(copy, this.stateDir, { recursive: true });
      this.#restores.push(Date.now());
    } finally {
      this.busy = false;
    }
  }

  /** Deletes the stopped agent's state directory's content: a disk lost or replaced (its copies are kept). */
  wipeState(): void {
    if (this.#agent !== undefined) throw new Error(`${this.name}: wipe-state while the agent runs`);
    this.busy = true;
    try {
      for (const entry of readdirSync(this.stateDir))
        rmSync(join(this.stateDir, entry), { recursive: true, force: true });
      this.#restores.push(Date.now()); // what the file held is gone by no agent's hand
    } finally {
      this.busy = false;
    }
  }

  netnsPath(containerID: string): string {
    return join(this.netnsDir, containerID);
  }

  createNetns(containerID: string): string {
    const path = this.netnsPath(containerID);
    writeFileSync(path, '');
    return path;
  }

  removeNetns(containerID: string): void {
    rmSync(this.netnsPath(containerID), { force: true });
  }

  /** CNI calls to this node not answered yet. */
  get callsInFlight(): number {
    return this.#calls;
  }

  /** A CNI call through the installed plugin, as a runtime makes it (for pod `pod-N` of UID `uid`). */
  async cni(command: 'ADD' | 'DEL', containerID: string, pod: number, uid = `uid-${pod}`): Promise<CniReply> {
    if (command === 'DEL') {
      const sent = this.#dels.get(containerID) ?? [];
      // While it starts, the agent it may reach is the next incarnation (start counts it on success);
      // while it stops, the one stopping (its end was counted at the SIGTERM).
      const incarnation = this.#incarnation + (this.#starting ? 1 : this.#stopping ? -1 : 0);
      sent.push({ at: Date.now(), incarnation, reachable: this.isUp || this.#starting || this.#stopping });
      this.#dels.set(containerID, sent);
    }
    this.#calls += 1;
    try {
      return await this.#call(command, containerID, pod, uid);
    } finally {
      this.#calls -= 1;
    }
  }

  #call(command: 'ADD' | 'DEL', containerID: string, pod: number, uid: string): Promise<CniReply> {
    return warren({
      command,
      containerID,
      netns: this.netnsPath(containerID),
      ifname: 'eth0',
      env: this.clock.env(),
      args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${POD_NAMESPACE};K8S_POD_NAME=pod-${pod};K8S_POD_UID=${uid};K8S_POD_INFRA_CONTAINER_ID=${containerID}`,
      config: {
        cniVersion: '1.0.0',
        name: this.network,
        ipam: {
          type: 'warren',
          socket: this.socket,
          journal_dir: join(this.stateDir, 'journal'),
          range: this.range,
          ...this.#ipam,
        },
      },
    });
  }

  /** Kills the agent by PID, unmounts the netns and state directories and removes every directory. */
  async close(): Promise<void> {
    await this.kill();
    for (const dir of [this.netnsDir, this.stateDir]) {
      spawnSync('umount', [dir]);
      mounted.delete(dir);
    }
    rmSync(this.#root, { recursive: true, force: true });
  }
}
