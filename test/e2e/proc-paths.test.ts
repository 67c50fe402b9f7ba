/**
 * A path under /proc (issue 34, item 8): Node's recursive mkdir loops there forever, so an agent
 * told to keep a directory under /proc spun with no log line, and a DEL whose network config sets
 * `journal_dir` under /proc spun the plugin at 100% CPU. The real agent and the real plugin
 * executable must each end, within a deadline, with an error naming the path.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { warren } from '../helpers/cni.ts';
import { CHILD_PATH, HANG_BOUND_MS, REPO, WARREN_BIN, liveChildren, tempDir, track } from '../helpers/processes.ts';

/** `promise`, or a failure after HANG_BOUND_MS that kills what is still running (a spin). */
async function withinDeadline<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      for (const pid of liveChildren()) process.kill(pid, 'SIGKILL');
      reject(new Error(`${what} did not end within ${HANG_BOUND_MS} ms (killed): it spins`));
    }, HANG_BOUND_MS);
  });
  try {
    return await Promise.race([promise, hang]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `warren agent` with `flags` over a private setup; resolves with its exit code and output. */
function agentWith(flags: readonly string[]): Promise<{ code: number | null; output: string }> {
  const dir = tempDir('warren-proc-');
  const child = track(
    spawn(
      process.execPath,
      [
        WARREN_BIN,
        'agent',
        '--state-dir',
        join(dir, 'state'),
        '--socket',
        join(dir, 'warren.sock'),
        '--journal-dir',
        join(dir, 'journal'),
        '--plugins-dir',
        join(dir, 'plugins'),
        '--node-name',
        'proc-node',
        '--netns-dirs',
        '',
        '--containerd',
        'off',
        ...flags,
      ],
      { cwd: REPO, env: { ...process.env, PATH: CHILD_PATH }, stdio: ['ignore', 'pipe', 'pipe'] },
    ),
  );
  let output = '';
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, output })));
}

describe('a directory under /proc', () => {
  const missing = `/proc/warren-no-such-${process.pid}`;

  for (const [flag, path] of [
    ['--plugins-dir', `${missing}/plugins`],
    ['--state-dir', `${missing}/state`],
    ['--journal-dir', `${missing}/journal`],
    ['--socket', `${missing}/run/warren.sock`],
  ] as const) {
    it(`stops the agent with an error naming it instead of spinning (${flag})`, async () => {
      const { code, output } = await withinDeadline(`warren agent ${flag} ${path}`, agentWith([flag, path]));
      assert.notEqual(code, 0, output);
      assert.match(output, /IO_FAILURE/, output);
      assert.ok(output.includes(`cannot create directory ${path.endsWith('.sock') ? `${missing}/run` : path}`), output);
      assert.ok(output.includes(`does not take the new directory ${missing}`), output);
    });
  }

  it('ends a DEL whose journal_dir is under /proc with an error naming it, the agent away, instead of spinning', async () => {
    const journal = `${missing}/journal`;
    const reply = await withinDeadline(
      'the plugin',
      warren({
        command: 'DEL',
        containerID: 'proc-del-1',
        ifname: 'eth0',
        config: {
          cniVersion: '1.0.0',
          name: 'procnet',
          ipam: {
            type: 'warren',
            socket: join(tempDir(), 'absent.sock'),
            range: '10.214.0.0/24',
            journal_dir: journal,
          },
        },
      }),
    );
    assert.equal(reply.code, 1, reply.stdout + reply.stderr);
    assert.equal(reply.json?.code, 11, reply.stdout);
    const said = `${String(reply.json?.msg)} ${String(reply.json?.details ?? '')}`;
    assert.ok(said.includes(`missed-delete journal ${journal} could not record the DEL`), said);
    assert.ok(said.includes(`does not take the new directory ${missing}`), said);
  });
});
