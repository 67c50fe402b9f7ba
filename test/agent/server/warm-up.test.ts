/**
 * The warm-up runs the ADD path while the agent starts, and leaves nothing of it behind (no
 * allocation, no pool, no counted call, no journal file) and nothing anyone else can reach: no
 * socket, and a server with the CNI route alone.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ManualClock, systemClock } from '../../../src/core/clock.ts';
import { QUIET_MS, exchange, warmUp, warmUpServer } from '../../../src/agent/server/warm-up.ts';
import { CniService } from '../../../src/agent/server/cni-service.ts';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import { ApiClient } from '../../../src/api/client.ts';
import { PATHS, ROUTES } from '../../../src/api/routes.ts';
import { type AgentHandle, startAgent } from '../../helpers/agent.ts';
import { histogramCount, scrape } from '../../helpers/prometheus.ts';
import { HANG_BOUND_MS, isRoot, tempDir, track, waitFor } from '../../helpers/processes.ts';
import { createUnixUser } from '../../helpers/unix-user.ts';

describe('the warm-up', () => {
  it('answers its own ADD, CHECK and DEL calls through the HTTP server and says how many', async () => {
    const report = await warmUp({ rounds: 12, clock: systemClock, node: 'n1' });
    // 12 ADDs, 12 DELs, a CHECK every 10th round: a call that failed would have thrown.
    assert.equal(report.calls, 12 + 12 + 2);
    assert.ok(report.ms > 0);
  });

  it('does nothing with no rounds', async () => {
    assert.deepEqual(await warmUp({ rounds: 0, clock: systemClock, node: 'n1' }), { calls: 0, ms: 0 });
  });

  it('can run twice at once in one process (each on its own server and store)', async () => {
    const [a, b] = await Promise.all([1, 2].map(() => warmUp({ rounds: 3, clock: systemClock, node: 'n1' })));
    assert.equal(a?.calls, 7);
    assert.equal(b?.calls, 7);
  });

  it('stops between two calls when its signal aborts', async () => {
    const abort = new AbortController();
    abort.abort();
    assert.equal((await warmUp({ rounds: 1_000, clock: systemClock, node: 'n1', signal: abort.signal })).calls, 0);
  });

  it('gives way to real calls: makes no call while they keep coming, then warms up', async () => {
    let asked = 0;
    // Busy for the first five asks: five quiet periods pass before the first call.
    const report = await warmUp({ rounds: 2, clock: systemClock, node: 'n1', busy: () => ++asked <= 5 });
    assert.equal(report.calls, 2 + 2 + 1);
    assert.ok(report.ms >= 5 * QUIET_MS, `warmed up in ${report.ms} ms, less than five quiet periods`);
    assert.ok(asked >= 6);
  });

  it('ends a wait for quiet at once when the agent stops', async () => {
    const abort = new AbortController();
    const clock = new ManualClock();
    let asked = 0;
    const warming = warmUp({ rounds: 5, clock, node: 'n1', busy: () => ++asked > 0, signal: abort.signal });
    // Waiting for quiet on a clock nobody steps: only the abort can end it.
    await waitFor('the warm-up to wait for quiet', () => (asked > 0 ? true : undefined));
    abort.abort();
    assert.deepEqual((await warming).calls, 0);
  });

  it("never serves a route of the live agent: its server has the CNI route alone, on the warm-up's own store", async () => {
    const store = new SqliteStore({ path: ':memory:', clock: systemClock });
    try {
      const cni = new CniService({
        allocator: new Allocator({ store, clock: systemClock, node: 'n1', blocks: false }),
        readiness: async () => {},
        storeKind: 'sqlite',
        clock: systemClock,
        gcGraceMs: 0,
      });
      const errors: unknown[] = [];
      const server = warmUpServer(cni, (error) => errors.push(error));
      // Valid requests, so that the only reason left for a refusal is that no service is behind it.
      const bodies: Record<string, object> = {
        [PATHS.release]: { address: '198.18.0.2' },
        [PATHS.audit]: { fix: true },
        [PATHS.forgetNode]: { node: 'n2' },
      };
      const others = ROUTES.filter((route) => route.path !== PATHS.cni);
      assert.ok(others.length >= 10);
      for (const { method, path } of others) {
        const answer = await exchange(server, method, path, method === 'POST' ? (bodies[path] ?? {}) : undefined);
        assert.equal(answer.status, 404, `${method} ${path} answered ${answer.status}: ${answer.body}`);
      }
      assert.deepEqual(errors, []);
    } finally {
      await store.close();
    }
  });
});

describe('an agent that warmed up', () => {
  let agent: AgentHandle | undefined;
  after(async () => void (await agent?.stop()));

  it('holds no allocation and no pool, counted no CNI call and journaled nothing', async () => {
    agent = await startAgent({ args: ['--metrics-address', '127.0.0.1:0'] });
    const started = agent;
    // The warm-up runs beside serving: its line comes after the agent is ready.
    await waitFor(
      'the warm-up to end',
      () => (/"calls":\d+[^}]*"msg":"warmed up"/.test(started.log()) ? true : undefined),
      HANG_BOUND_MS,
    );
    const api = new ApiClient({ socket: agent.socket });
    assert.deepEqual(await agent.allocations(), []);
    assert.deepEqual(await api.pools(), []);
    const families = await scrape((await api.status()).metrics?.address as string);
    for (const command of ['ADD', 'CHECK', 'DEL']) {
      assert.equal(
        histogramCount(families, 'warren_cni_request_duration_seconds', { command }),
        0,
        `${command} calls counted`,
      );
    }
    assert.deepEqual(
      readdirSync(join(agent.dir, 'journal')).filter((f) => !f.startsWith('.') && f !== 'rejected'),
      [],
    );
  });
});

/**
 * Run as the other user: reads abstract socket names (JSON strings, one a line) from stdin and,
 * for each at once, connects and asks GET /v1/status; prints one JSON line per name with what came
 * back. Exits when stdin ends and every attempt has.
 */
const INTRUDER = `
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
const attempts = [];
for await (const line of createInterface({ input: process.stdin })) {
  const name = JSON.parse(line);
  attempts.push(new Promise((resolve) => {
    let answer = '';
    const socket = connect('\\0' + name);
    const done = (error) => { clearTimeout(timer); socket.destroy(); resolve({ name, answer, error }); };
    const timer = setTimeout(() => done('no answer in 3 s'), 3000);
    socket.on('connect', () => socket.write('GET /v1/status HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n'));
    socket.on('data', (c) => (answer += c));
    socket.on('error', (e) => done(e.code));
    socket.on('close', () => done(undefined));
  }));
}
for (const r of await Promise.all(attempts)) process.stdout.write(JSON.stringify(r) + '\\n');
`;

/** Abstract unix socket names (without the leading NUL) of the sockets process `pid` has open. */
function abstractSocketsOf(pid: number): string[] {
  const inodes = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m?.[1] !== undefined) inodes.add(m[1]);
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    return []; // not started yet, or gone
  }
  const names: string[] = [];
  for (const line of readFileSync('/proc/net/unix', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    const [inode, path] = [fields[6], fields[7]];
    if (inode !== undefined && path?.startsWith('@') === true && inodes.has(inode)) names.push(path.slice(1));
  }
  return names;
}

/** The children of this process whose command line holds `mark`. */
function childrenWith(mark: string): number[] {
  const children = readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8')
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
  return children.filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(mark);
    } catch {
      return false;
    }
  });
}

describe('another local user while the agent starts', {
  skip: isRoot() ? false : 'needs root (useradd, reading the agent’s /proc entries)',
}, () => {
  it('reaches none of its routes through any abstract socket the agent has open, during its start and its warm-up', async () => {
    const user = await createUnixUser('wrnwarm');
    let intruder: ChildProcess | undefined;
    let agent: AgentHandle | undefined;
    try {
      intruder = track(
        spawn(process.execPath, ['--input-type=module', '-e', INTRUDER], {
          uid: user.uid,
          gid: user.gid,
          cwd: '/',
          stdio: ['pipe', 'pipe', 'pipe'],
        }),
      );
      let output = '';
      intruder.stdout?.on('data', (c: Buffer) => (output += c.toString()));
      intruder.stderr?.on('data', (c: Buffer) => (output += c.toString()));
      const intruderDone = new Promise<void>((resolve) => intruder?.once('close', () => resolve()));
      const dir = tempDir('warren-warm-up-intruder-');
      // Scan from before the agent process exists until its warm-up has ended: every abstract name
      // of the agent's goes to the other user at once.
      const seen = new Set<string>();
      let scans = 0;
      let agentPid: number | undefined;
      let scanning = true;
      const scanner = (async () => {
        while (scanning) {
          agentPid ??= childrenWith(dir)[0];
          if (agentPid !== undefined) {
            scans++;
            for (const name of abstractSocketsOf(agentPid)) {
              if (seen.has(name)) continue;
              seen.add(name);
              intruder?.stdin?.write(`${JSON.stringify(name)}\n`);
            }
          }
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      })();
      agent = await startAgent({ dir, args: ['--warm-up', '150'] });
      const started = agent;
      await waitFor(
        'the warm-up to end',
        () => (/"msg":"(warmed up|warm-up failed)"/.test(started.log()) ? true : undefined),
        HANG_BOUND_MS,
      );
      scanning = false;
      await scanner;
      intruder.stdin?.end();
      await intruderDone;
      assert.ok(agentPid !== undefined && scans > 0, 'the scan never saw the agent process');
      const results = output
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { name: string; answer: string; error?: string });
      assert.equal(results.length, seen.size, `the intruder reported ${output}`);
      // An HTTP answer of any status is a route reached. (The instance locks, abstract sockets
      // too, answer with their holder: no route; issue 24 item 14 is theirs.)
      const answered = results.filter((r) => r.answer.startsWith('HTTP/'));
      assert.deepEqual(answered, [], `user ${user.name} reached the agent's API through abstract sockets`);
      // And the agent serves on: the scan took nothing from it.
      assert.deepEqual(await agent.allocations(), []);
    } finally {
      await agent?.stop();
      if (intruder !== undefined && intruder.exitCode === null) intruder.kill('SIGKILL');
      await user.remove();
    }
  });
});
