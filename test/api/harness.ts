/**
 * The agent's API server in process, composed by the agent's own functions: `servingParts` (the
 * operator and CNI services, doctor's facts, the API server) over the release side of the release
 * harness: the real HTTP server on a unix socket in a temp dir, over an in-memory
 * SQLite store whose reads, commits and health check fail on demand, and a manual clock. What the
 * agent logs as unexpected failures is collected instead. Shared by the API tests.
 */
import { join } from 'node:path';
import { ManualClock } from '../../src/core/clock.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import type { AllocationFilter, CommitResult, LedgerOp, Revision } from '../../src/store/store.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import { ApiClient } from '../../src/api/client.ts';
import { servingParts } from '../../src/agent/server/serving.ts';
import type { PublishedView } from '../../src/agent/server/allocation-pages.ts';
import { silentLogger } from '../helpers/logger.ts';
import { tempDir } from '../helpers/processes.ts';
import { releaseHarness } from '../agent/release/harness.ts';

/** A store whose reads, commits and health check fail on demand, with an error of the test's choosing. */
export class FaultyStore extends SqliteStore {
  /** Thrown by every read of allocations. */
  listFault: Error | undefined;
  pingFault: Error | undefined;
  /** Thrown by every commit. */
  commitFault: Error | undefined;
  override async commit(pool: string, expected: Revision, ops: readonly LedgerOp[]): Promise<CommitResult> {
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

/**
 * The agent's parts as agent.ts wires them, over `:memory:` SQLite, serving on a temp socket; with
 * `published`, every node's allocations as a cluster store publishes them (`--cluster`).
 */
export async function harness(o: { readonly published?: PublishedView } = {}): Promise<Harness> {
  const clock = new ManualClock(Date.parse('2030-01-01T00:00:00Z'));
  const store = new FaultyStore({ path: ':memory:' });
  const dir = tempDir('warren-api-');
  const socket = join(dir, 'api.sock');
  const netnsDir = tempDir('warren-api-netns-');
  // The release side exactly as the release tests build it (journal intake, pipeline, reconcile
  // pass), from options resolved as the agent resolves its flags; the served API from the same.
  const release = await releaseHarness(clock, store, {
    node: 'n1',
    flags: { stateDir: dir, socket, netnsDirs: netnsDir },
  });
  const { options, allocator, dir: journalDir, pipeline, reconciler, scopes, done } = release;
  const failures: string[] = [];
  const { server } = servingParts({
    options,
    storeKind: 'sqlite',
    store,
    allocator,
    clock,
    logger: silentLogger,
    version: '0.0.0-test',
    reconciler,
    beforeAdd: (owner, podUID) => pipeline.applyPending(owner, podUID),
    runtimeOf: (a) => scopes.adapterOf(a),
    ...(o.published === undefined ? {} : { published: o.published }),
    onFailure: (error, command) => failures.push(`cni ${command}: ${(error as Error).message}`),
    onError: (error, route) => failures.push(`${route}: ${(error as Error).message}`),
  });
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
