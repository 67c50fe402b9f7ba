/**
 * Where the scale harness's API server is, and what the harness can ask of it:
 * - `in-process`: the fake (fake-control.ts) in the harness's own process: the CI test's place,
 *   cheapest to start, but this process holds both ends of every node's connections (~13 a node);
 * - `child`: the fake in a process of its own (fake-api-process.ts), started here and stopped by its
 *   PID, asked over IPC: the harness's process holds only the nodes' ends;
 * - `kubeconfig`: any API server a kubeconfig file names, a real kube-apiserver included, with
 *   Warren's CRDs installed and the namespace `warren` present. Nothing is asked of it but what the
 *   nodes ask: it keeps no count the harness can read and no clock the harness can set, so the
 *   counts come from each node's own request counter (client-counts.ts) and a settle waits for
 *   those counts to stop moving.
 *
 * The fake serves HTTPS over HTTP/1.1, or with `http2` (`--http2`) offers HTTP/2 by ALPN beside it,
 * as a kube-apiserver does: then each node's client multiplexes its requests and watches over one
 * connection, where over HTTP/1.1 it holds one per watch and a pool for requests.
 *
 * Guarantees: every node gets a kubeconfig of its own where the server can tell nodes apart (the
 * fake's per-client tokens), the file given to all nodes otherwise; `progress`, `counts` and
 * `watchCounts` answer undefined where the server counts nothing; `stop` ends what `start` began
 * (the child by its PID, after asking it to stop) and never a server it did not start.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { ConnectionCounts, FakeKubeApi } from '../../test/helpers/fake-kube-api.ts';
import type { ControlAnswer, ControlRequest } from './fake-api-process.ts';
import { FakeControl, type ServerCounts, type ServerProgress } from './fake-control.ts';

export type ApiPlace = 'in-process' | 'child' | 'kubeconfig';

export interface ScaleApiServer {
  readonly place: ApiPlace;
  /** A kubeconfig whose requests are no node's (the auditor's). */
  readonly adminKubeconfig: string;
  /** The fake itself, where it runs in this process (tests read its objects). */
  readonly fake?: FakeKubeApi;
  /** The kubeconfig node `name` connects with. */
  kubeconfigFor(name: string): Promise<string>;
  /** Sets the server's clock to the harness's (the fake's; nothing on a real server). */
  setNow(ms: number): Promise<void>;
  progress(): Promise<ServerProgress | undefined>;
  /** Forgets the server's counts: a window begins. */
  clearCounts(): Promise<void>;
  counts(): Promise<ServerCounts | undefined>;
  /** Open watch streams, by resource. */
  watchCounts(resources: readonly string[]): Promise<Record<string, number> | undefined>;
  /** The clients' TLS connections to the server. */
  connections(): Promise<ConnectionCounts | undefined>;
  stop(): Promise<void>;
}

/** The fake of `cluster` in this process, for a test that reads its request log; throws elsewhere. */
export function fakeOf(cluster: { readonly api: ScaleApiServer }): FakeKubeApi {
  const { fake } = cluster.api;
  if (fake === undefined) throw new Error(`the API server runs ${cluster.api.place}: its request log is not here`);
  return fake;
}

/** The fake in this process. */
class InProcessApi implements ScaleApiServer {
  readonly place = 'in-process';
  readonly adminKubeconfig: string;
  readonly fake: FakeKubeApi;
  readonly #control: FakeControl;

  constructor(control: FakeControl) {
    this.#control = control;
    this.fake = control.api;
    this.adminKubeconfig = control.adminKubeconfig();
  }

  async kubeconfigFor(name: string): Promise<string> {
    return this.#control.kubeconfigFor(name);
  }
  async setNow(ms: number): Promise<void> {
    this.#control.setNow(ms);
  }
  async progress(): Promise<ServerProgress> {
    return this.#control.progress();
  }
  async clearCounts(): Promise<void> {
    this.#control.clearCounts();
  }
  async counts(): Promise<ServerCounts> {
    return this.#control.counts();
  }
  async watchCounts(resources: readonly string[]): Promise<Record<string, number>> {
    return this.#control.watchCounts(resources);
  }
  async connections(): Promise<ConnectionCounts> {
    return this.#control.connections();
  }
  stop(): Promise<void> {
    return this.#control.stop();
  }
}

/** How long a stopping child may take before it is killed by its PID. */
const CHILD_STOP_MS = 10_000;

/** The fake in a child process, asked over IPC. */
export class ChildProcessApi implements ScaleApiServer {
  readonly place = 'child';
  readonly adminKubeconfig: string;
  readonly #child: ChildProcess;
  readonly #waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #next = 0;

  private constructor(child: ChildProcess, adminKubeconfig: string) {
    this.#child = child;
    this.adminKubeconfig = adminKubeconfig;
  }

  /** The child's PID (it is stopped by it). */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  static async start(nowMs: number, http2 = false): Promise<ChildProcessApi> {
    const entry = fileURLToPath(new URL('./fake-api-process.ts', import.meta.url));
    const child = fork(entry, [String(nowMs), ...(http2 ? ['http2'] : [])], {
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const [first] = (await Promise.race([
      once(child, 'message'),
      once(child, 'exit').then(([code]) => {
        throw new Error(`the fake API server's process exited (${String(code)}) before it was ready`);
      }),
    ])) as [unknown];
    const ready = first as { ready?: boolean; adminKubeconfig?: string } | undefined;
    if (ready?.ready !== true || typeof ready.adminKubeconfig !== 'string') {
      if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
      throw new Error(`the fake API server's process said ${JSON.stringify(first)} before it was ready`);
    }
    const api = new ChildProcessApi(child, ready.adminKubeconfig);
    child.on('message', (m: ControlAnswer) => api.#answered(m));
    child.on('exit', (code) => {
      for (const w of api.#waiting.values())
        w.reject(new Error(`the fake API server's process exited (${String(code)})`));
      api.#waiting.clear();
    });
    return api;
  }

  #answered(m: ControlAnswer): void {
    const w = this.#waiting.get(m.id);
    if (w === undefined) return;
    this.#waiting.delete(m.id);
    if (m.error !== undefined) w.reject(new Error(`the fake API server's process: ${m.error}`));
    else w.resolve(m.result);
  }

  #ask(op: ControlRequest['op'], ...args: unknown[]): Promise<unknown> {
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      this.#child.send({ id, op, args } satisfies ControlRequest, (error) => {
        if (error === null) return;
        this.#waiting.delete(id);
        reject(error);
      });
    });
  }

  async kubeconfigFor(name: string): Promise<string> {
    return (await this.#ask('kubeconfigFor', name)) as string;
  }
  async setNow(ms: number): Promise<void> {
    await this.#ask('setNow', ms);
  }
  async progress(): Promise<ServerProgress> {
    return (await this.#ask('progress')) as ServerProgress;
  }
  async clearCounts(): Promise<void> {
    await this.#ask('clearCounts');
  }
  async counts(): Promise<ServerCounts> {
    return (await this.#ask('counts')) as ServerCounts;
  }
  async watchCounts(resources: readonly string[]): Promise<Record<string, number>> {
    return (await this.#ask('watchCounts', resources)) as Record<string, number>;
  }
  async connections(): Promise<ConnectionCounts> {
    return (await this.#ask('connections')) as ConnectionCounts;
  }

  /** Asks the child to stop; kills it by its PID if it has not exited within CHILD_STOP_MS. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    const timer = setTimeout(() => {
      if (child.pid !== undefined && child.exitCode === null) process.kill(child.pid, 'SIGKILL');
    }, CHILD_STOP_MS);
    await this.#ask('stop').catch(() => undefined);
    await exited;
    clearTimeout(timer);
  }
}

/** An API server named by a kubeconfig file: the harness asks it nothing of its own. */
class KubeconfigApi implements ScaleApiServer {
  readonly place = 'kubeconfig';
  readonly adminKubeconfig: string;

  constructor(path: string) {
    this.adminKubeconfig = path;
  }

  async kubeconfigFor(): Promise<string> {
    return this.adminKubeconfig;
  }
  async setNow(): Promise<void> {}
  async progress(): Promise<undefined> {
    return undefined;
  }
  async clearCounts(): Promise<void> {}
  async counts(): Promise<undefined> {
    return undefined;
  }
  async watchCounts(): Promise<undefined> {
    return undefined;
  }
  async connections(): Promise<undefined> {
    return undefined;
  }
  async stop(): Promise<void> {}
}

export type ApiChoice =
  | { readonly place: 'in-process'; readonly http2?: boolean }
  | { readonly place: 'child'; readonly http2?: boolean }
  | { readonly place: 'kubeconfig'; readonly path: string };

/** The API server of `choice`, its clock (a fake's) at `nowMs`. */
export async function startApiServer(choice: ApiChoice, nowMs: number): Promise<ScaleApiServer> {
  switch (choice.place) {
    case 'in-process':
      return new InProcessApi(await FakeControl.start(nowMs, choice.http2 ?? false));
    case 'child':
      return ChildProcessApi.start(nowMs, choice.http2 ?? false);
    case 'kubeconfig':
      return new KubeconfigApi(choice.path);
    default: {
      const never: never = choice;
      throw new Error(`unknown API server place ${JSON.stringify(never)}`);
    }
  }
}
