/**
 * The agent harness (test/helpers/agent.ts) and the process bookkeeping under it
 * (test/helpers/processes.ts) when things go wrong: a startAgent whose agent never answers or
 * exits kills it and throws an error saying which, and a test file that hangs with a real agent
 * running is ended by the suite's file timeout (scripts/test.ts, which npm test runs) or by a signal,
 * leaving no process behind. Without these, one slow start on a loaded machine kept a file's
 * process alive until CI gave up. And an agent a test expects to die (a failpoint's death):
 * started without waiting for it to answer, its death awaited as an event with a deadline.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { planOf, runnerFlags } from '../../scripts/test.ts';
import { startAgent } from '../helpers/agent.ts';
import {
  CHILD_PATH,
  REPO,
  isGone,
  liveChildren,
  processesUsing,
  tempDir,
  track,
  waitFor,
} from '../helpers/processes.ts';

const FIXTURE = join(REPO, 'test', 'helpers-check', 'fixtures', 'hanging-file.ts');

/** A preload that records the agent's PID and then blocks it for ever: an agent that never answers. */
function neverAnswers(dir: string): { env: NodeJS.ProcessEnv; pidFile: string } {
  const pidFile = join(dir, 'agent.pid');
  const preload = join(dir, 'never-answers.cjs');
  writeFileSync(
    preload,
    `require('node:fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));\nAtomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);\n`,
  );
  return { env: { NODE_OPTIONS: `--require=${preload}` }, pidFile };
}

/** This process's environment for a test file run from inside a test (NODE_TEST_CONTEXT would mark it a child of this runner, which skips running files). */
function fileEnv(dir: string): NodeJS.ProcessEnv {
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  return { ...env, PATH: CHILD_PATH, WARREN_HANG_DIR: dir };
}

/** The flags the suite runner (scripts/test.ts, which npm test runs) runs every lane of files with. */
function suiteFlags(): { timeoutMs: number; forceExit: boolean } {
  const commands = planOf([])
    .flat()
    .map((lane) => runnerFlags(lane.concurrency).join(' '));
  const timeouts = commands.map((command) => /--test-timeout=(\d+)/.exec(command)?.[1]).map((t) => Number(t ?? 0));
  const forceExit = commands.some((command) => command.includes('--test-force-exit'));
  return { timeoutMs: Math.min(...timeouts), forceExit };
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null)
      resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

describe('a failing startAgent', () => {
  it('kills an agent that never answers and says it timed out, leaving no process behind', async () => {
    const dir = tempDir('warren-hc-agent-mute-');
    const { env, pidFile } = neverAnswers(dir);
    const before = liveChildren();
    await assert.rejects(startAgent({ dir, env, readyWithinMs: 3_000 }), (error: Error) => {
      assert.match(
        error.message,
        /the agent did not start: timed out after 3000 ms waiting for agent \d+ on .*warren\.sock to answer/,
      );
      return true;
    });
    const pid = Number(readFileSync(pidFile, 'utf8'));
    assert.ok(isGone(pid), `agent ${pid} still runs after startAgent failed`);
    assert.deepEqual(liveChildren(), before);
    assert.deepEqual(processesUsing(dir), []);
  });

  it('says at once that an agent exited, with what it printed, leaving no process behind', async () => {
    const dir = tempDir('warren-hc-agent-exit-');
    const before = liveChildren();
    await assert.rejects(startAgent({ dir, args: ['--no-such-option-hc'] }), (error: Error) => {
      assert.match(error.message, /the agent did not start: agent exited \(\d+\) before answering/);
      assert.match(error.message, /no-such-option-hc/);
      return true;
    });
    assert.deepEqual(liveChildren(), before);
    assert.deepEqual(processesUsing(dir), []);
  });
});

describe('an agent awaited to die (failpoints)', () => {
  it('is answered at once without waiting for readiness, and exited() reports its death or throws while it runs', async () => {
    const dir = tempDir('warren-hc-agent-dies-');
    const { env } = neverAnswers(dir);
    const agent = await startAgent({ dir, env, awaitReady: false });
    try {
      await assert.rejects(agent.exited(200), new RegExp(`agent ${agent.pid} still runs 200 ms later`));
      agent.child.kill('SIGKILL');
      assert.deepEqual(await agent.exited(), { code: null, signal: 'SIGKILL' });
    } finally {
      await agent.kill();
    }
    assert.deepEqual(processesUsing(dir), []);
  });
});

describe('a test file that hangs', () => {
  it('is ended by the suite file timeout, and its agent with it', async () => {
    const flags = suiteFlags();
    assert.ok(flags.timeoutMs > 0, 'the suite runner gives every file a --test-timeout');
    // --test-force-exit loses the last reports of a file (whole files' counts went missing): a
    // file is ended by processes.ts instead, a grace after its tests are done.
    assert.ok(!flags.forceExit, 'the suite runner does not cut files short with --test-force-exit');
    const dir = tempDir('warren-hc-hang-');
    const pidFile = join(dir, 'agent.pid');
    // The same flags with a short timeout: the file's agent starts at the top level, outside it.
    const runner = track(
      spawn(process.execPath, ['--test', '--test-timeout=2000', '--test-reporter=tap', FIXTURE], {
        cwd: REPO,
        env: fileEnv(dir),
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let output = '';
    runner.stdout?.on('data', (c: Buffer) => (output += c.toString()));
    runner.stderr?.on('data', (c: Buffer) => (output += c.toString()));
    const exit = await exitOf(runner);
    assert.equal(exit.code, 1, `the runner failed the hung file: ${output}`);
    assert.match(output, /test timed out after 2000ms/);
    const pid = Number(readFileSync(pidFile, 'utf8'));
    await waitFor(`agent ${pid} of the hung file to be gone`, () => (isGone(pid) ? true : undefined));
    assert.deepEqual(processesUsing(dir), []);
  });

  it('stopped by SIGTERM, takes its agent with it', async () => {
    const dir = tempDir('warren-hc-term-');
    const pidFile = join(dir, 'agent.pid');
    // The file run directly by node (node:test runs it in this process), as a CI runner's cancel sees it.
    const file = track(spawn(process.execPath, [FIXTURE], { cwd: REPO, env: fileEnv(dir), stdio: 'ignore' }));
    await waitFor('the hung file to start its agent', () =>
      existsSync(pidFile) && readFileSync(pidFile, 'utf8') !== '' ? true : undefined,
    );
    const pid = Number(readFileSync(pidFile, 'utf8'));
    file.kill('SIGTERM');
    const exit = await exitOf(file);
    assert.equal(exit.code, 143);
    await waitFor(`agent ${pid} of the stopped file to be gone`, () => (isGone(pid) ? true : undefined));
    assert.deepEqual(processesUsing(dir), []);
  });
});
