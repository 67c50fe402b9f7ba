/**
 * The agent's start and stop as a whole (issue 24, item 17): a failure while starting or stopping
 * either stops everything with a clear error, or leaves the agent serving with that one part
 * reported failed — never a socket answering ADD and saying ready with the journal not drained, the
 * store closed or the lock still held.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { resolveAgentOptions } from '../../src/agent/settings/options.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { recordMissedDelete } from '../../src/plugin/journal-writer.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import { ForwardingStore } from '../../src/store/forwarding-store.ts';
import { systemClock } from '../../src/core/clock.ts';
import { JournalIntake } from '../../src/agent/release/journal.ts';
import { RecentErrors } from '../../src/agent/metrics/recent-errors.ts';
import type { MissedDeleteJournal } from '../../src/sources/missed-delete-journal.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { HANG_BOUND_MS, CHILD_PATH, REPO, removeDir, tempDir, track, waitFor } from '../helpers/processes.ts';
import { silentLogger } from '../helpers/logger.ts';

/** A primary whose derivation overflows the stack (JSON.stringify of a value 100,000 levels deep). */
function deepPrimary(): string {
  const depth = 100_000;
  return `{"cniVersion":"1.0.0","name":"deepnet","type":"bridge","ipam":{"type":"host-local","subnet":"10.219.0.0/24"},"x":${'['.repeat(depth)}${']'.repeat(depth)}}`;
}

describe("the agent's start and stop", () => {
  const agents: AgentHandle[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
  });

  it('a primary config the manager cannot derive leaves the agent draining its journal, the manager reported failed, never half-started', async () => {
    const dir = tempDir('warren-lifecycle-deep-');
    const confDir = join(dir, 'net.d');
    mkdirSync(confDir);
    writeFileSync(join(confDir, '10-deep.conf'), deepPrimary());
    const agent = await startAgent({
      dir,
      args: ['--cni-conf-dir', confDir, '--manage-cni-config', 'on', '--metrics-address', '', '--warm-up', '0'],
    });
    agents.push(agent);
    const journal = join(dir, 'journal');
    // A DEL the plugin journaled while the agent was serving: the agent drains it (nothing holds
    // the address, so the intent is simply completed and its file removed).
    const file = recordMissedDelete(journal, {
      format: 1,
      network: 'deepnet',
      containerID: 'deep-del-1',
      ifname: 'eth0',
      recordedAt: Date.now(),
      reason: 'test',
    });
    await waitFor(
      `the agent to drain ${file} (log: ${agent.log().slice(-2000)})`,
      () => (existsSync(file) ? undefined : true),
      HANG_BOUND_MS,
    );
    const status = (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/status' })).body as {
      ready: boolean;
      cniConfig?: { state: string; problem?: string };
    };
    assert.notEqual(status.cniConfig?.state, 'current', 'the config manager does not say all is well');
    assert.ok(
      status.cniConfig?.problem !== undefined && status.cniConfig.problem !== '',
      JSON.stringify(status.cniConfig),
    );
    // The instance lock lives there as .journal.lock, with no SQLite journal file beside it.
    assert.deepEqual(
      readdirSync(journal).filter((n) => n !== 'rejected' && n !== '.journal.lock'),
      [],
    );
  });

  it('a part that fails while stopping leaves no socket served, no store open and no lock held', async () => {
    const dir = tempDir('warren-lifecycle-stop-');
    const options = resolveAgentOptions(
      {
        stateDir: dir,
        socket: join(dir, 'warren.sock'),
        journalDir: join(dir, 'journal'),
        netnsDirs: '',
        containerd: 'off',
        metricsAddress: '',
        warmUpRounds: '0',
        nodeName: 'lifecycle',
      },
      {},
    );
    class FailingClose extends ForwardingStore {
      override async close(): Promise<void> {
        await super.close();
        throw new Error('injected: the store failed to close');
      }
    }
    const logger = silentLogger;
    const firstStore = new FailingClose(new SqliteStore({ path: join(dir, 'first.db'), clock: systemClock }));
    const first = new Agent(options, { logger, store: { kind: 'sqlite', store: firstStore } });
    await first.start();
    await assert.rejects(first.stop(), /injected: the store failed to close/);
    assert.equal(existsSync(options.socket), false, 'the socket is gone');
    // The lock was released although the store failed before it: a new agent starts on the same directory.
    const secondStore = new SqliteStore({ path: join(dir, 'second.db'), clock: systemClock });
    const second = new Agent(options, { logger, store: { kind: 'sqlite', store: secondStore } });
    await second.start();
    await second.stop();
    removeDir(dir);
  });

  it('anything thrown that nothing caught ends the agent with a clear message and a non-zero exit', async () => {
    const dir = tempDir('warren-lifecycle-fatal-');
    // The real `warren agent` entry, with a fault planted after it serves: an unhandled rejection.
    const program = `
      const { runAgent } = await import(${JSON.stringify(join(REPO, 'src/cli/agent-command.ts'))});
      setTimeout(() => { Promise.reject(new Error('planted fault')); }, 1000);
      process.exitCode = await runAgent(${JSON.stringify(['--state-dir', dir, '--socket', join(dir, 'w.sock'), '--journal-dir', join(dir, 'journal'), '--netns-dirs', '', '--containerd', 'off', '--metrics-address', '', '--warm-up', '0', '--node-name', 'lifecycle'])},
        { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t), env: process.env });`;
    const child = track(
      spawn(process.execPath, ['--input-type=module', '-e', program], {
        cwd: REPO,
        env: { ...process.env, PATH: CHILD_PATH },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let out = '';
    let err = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    assert.equal(code, 1, `${out}${err}`);
    assert.match(err, /warren agent: unhandled promise rejection: planted fault/);
    const fatal = out.split('\n').filter((l) => l.includes('"level":60'));
    assert.equal(fatal.length, 1, out);
    assert.match(fatal[0] as string, /planted fault/);
    removeDir(dir);
  });

  it('a journal watch that fails is not swallowed: the intake rejects, so the agent stops rather than serve without draining', async () => {
    const broken = {
      dir: '/nonexistent',
      // biome-ignore lint/correctness/useYield: a watch that fails before its first event
      async *events() {
        throw new Error('injected: the watch failed');
      },
    } as unknown as MissedDeleteJournal;
    const logger = silentLogger;
    const errors = new RecentErrors(systemClock, logger);
    const intake = new JournalIntake({ journal: broken, logger, errors });
    await assert.rejects(
      intake.consume(new AbortController().signal, () => undefined),
      /injected: the watch failed/,
    );
    assert.match(
      errors
        .list()
        .map((e) => e.message)
        .join('\n'),
      /journal watch stopped: injected: the watch failed/,
    );
  });
});
