/**
 * The agent's API server in process, as agent.ts wires it: the real HTTP server on a unix socket
 * in a temp dir, over an in-memory SQLite store whose reads, commits and health check fail on
 * demand, and a manual clock. Shared by the API tests.
 */
import type { Server } from 'node:http';
import { join } from 'node:path';
import { ManualClock } from '../../src/core/clock.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import type { AllocationFilter, CommitResult, PoolOp, Revision } from '../../src/store/store.ts';
import { SqliteStore } from '../../src/store/sqlite-store.ts';
import { ApiClient } from '../../src/api/client.ts';
import { createApiServer } from '../../src/agent/server/api-server.ts';
import { CniService } from '../../src/agent/server/cni-service.ts';
import { AgentService } from '../../src/agent/server/operator-service.ts';
import { doctorFacts } from '../../src/agent/server/doctor-facts.ts';
import { resolveAgentOptions } from '../../src/agent/settings/options.ts';
import { NetnsObserver } from '../../src/sources/netns.ts';
import { tempDir } from '../helpers/processes.ts';
import { releaseHarness } from '../agent/release/harness.ts';

/** A store whose reads, commits and health check fail on demand, with an error of the test's choosing. */
export class FaultyStore extends SqliteStore {
  /** Thrown by every read of allocations. */
  listFault: Error | undefined;
  pingFault: Error | undefined;
  /** Thrown by every commit. */
  commitFault: Error | undefined;
  override async commit(pool: string, expected: Revision, ops: readonly PoolOp[]): Promise<CommitResult> {
    if (this.commitFault !== undefined) throw this.commitFault;
    return super.commit(pool, expected, ops);
  }
  override async list(filter?: AllocationFilter): Promise<Allocation[]> {
    if (this.listFault !== undefined) throw this.listFault;
    return super.list(filter);
  }
  override async findByOwner(owner: Parameters<SqliteStore['findByOwner']>[0]): Promise<Allocation[]> {
    if (this.listFault !== undefined) throw this.listFault;
    return super.findByOwner(owner);
  }
  override async ping(): Promise<void> {
    if (this.pingFault !== undefined) throw this.pingFault;
    return super.ping();
  }
}

export interface Harness {
  readonly clock: ManualClock;
  readonly store: FaultyStore;
  readonly socket: string;
  readonly client: ApiClient;
  /** What the server and the CNI service reported as unexpected failures. */
  readonly failures: string[];
  readonly journalDir: string;
  /** The one netns directory the agent is told to judge (a temp dir: not a mount point, so not observable). */
  readonly netnsDir: string;
  close(): Promise<void>;
}

/** The agent's parts as agent.ts wires them, over `:memory:` SQLite, serving on a temp socket. */
export async function harness(): Promise<Harness> {
  const clock = new ManualClock(Date.parse('2030-01-01T00:00:00Z'));
  const store = new FaultyStore({ path: ':memory:' });
  // The release side exactly as the release tests build it: journal intake, pipeline, reconcile pass.
  const { allocator, dir: journalDir, pipeline, reconciler, done } = releaseHarness(clock, store, { node: 'n1' });
  const dir = tempDir('warren-api-');
  const socket = join(dir, 'api.sock');
  const netnsDir = tempDir('warren-api-netns-');
  // The agent's own setup as agent.ts reports it for `warren doctor`, from options resolved as the agent resolves its flags.
  const options = resolveAgentOptions({ stateDir: dir, socket, journalDir, nodeName: 'n1', netnsDirs: netnsDir, metricsAddress: '' }, {}, 0, dir);
  const doctor = () => doctorFacts({ options, store, observer: new NetnsObserver(options.netnsDirs), clock, version: '0.0.0-test' });
  const service = new AgentService({ store, allocator, clock, socket, version: '0.0.0-test', reconciler, doctor });
  const failures: string[] = [];
  const cni = new CniService({
    allocator,
    readiness: () => service.readiness(),
    storeKind: 'sqlite',
    clock,
    gcGraceMs: 60_000,
    beforeAdd: (owner) => pipeline.applyPending(owner),
    onFailure: (error, command) => failures.push(`cni ${command}: ${(error as Error).message}`),
  });
  const server: Server = createApiServer({ cni, service, onError: (error, route) => failures.push(`${route}: ${(error as Error).message}`) });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    clock,
    store,
    socket,
    client: new ApiClient({ socket, timeoutMs: 10_000 }),
    failures,
    journalDir,
    netnsDir,
    async close() {
      await done();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await store.close();
    },
  };
}
