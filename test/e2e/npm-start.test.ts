/**
 * `npm start` then SIGTERM (issue 34, item 11): npm runs the script through `sh -c` and forwards
 * SIGTERM to that shell, which died and left the agent running, orphaned, holding its socket and
 * its locks. The real `npm start` on private paths (the settings' environment variables), SIGTERM
 * to npm's PID: every process of the run ends, the socket is gone and another agent can take the
 * same state directory and socket.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import { startAgent } from '../helpers/agent.ts';
import { CHILD_PATH, REPO, StopWaiting, processesUsing, tempDir, track, waitFor } from '../helpers/processes.ts';

describe('npm start', () => {
  it('stops the agent on SIGTERM to npm, leaving no orphan holding the socket and the locks', async (t) => {
    const dir = tempDir('warren-npm-start-');
    const socket = join(dir, 'warren.sock');
    // Whatever fails, nothing of this run outlives the test (an orphaned agent is what it looks for).
    t.after(() => {
      for (const pid of processesUsing(dir)) process.kill(pid, 'SIGKILL');
    });
    // Without its prestart: the build is the suite's pretest's, and rebuilding dist/ here would
    // replace the executables other e2e files run beside this one. `start` itself runs as users run it.
    const npm = track(
      spawn('npm', ['start', '--ignore-scripts'], {
        cwd: REPO,
        env: {
          ...process.env,
          PATH: CHILD_PATH,
          npm_config_update_notifier: 'false',
          WARREN_STATE_DIR: dir,
          WARREN_SOCKET: socket,
          WARREN_JOURNAL_DIR: join(dir, 'journal'),
          WARREN_PLUGINS_DIR: join(dir, 'plugins'),
          WARREN_NODE_NAME: 'npm-start-node',
          WARREN_NETNS_DIRS: '',
          WARREN_CONTAINERD: 'off',
          WARREN_METRICS_ADDRESS: '127.0.0.1:0',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let output = '';
    npm.stdout?.on('data', (c: Buffer) => (output += c.toString()));
    npm.stderr?.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<void>((resolve) => npm.once('exit', () => resolve()));
    await waitFor(`the agent started by npm start to answer on ${socket}`, async () => {
      if (npm.exitCode !== null || npm.signalCode !== null) throw new StopWaiting(`npm start exited:\n${output}`);
      const r = await requestJson({ socket, method: 'GET', path: '/v1/status', timeoutMs: 5_000 });
      return r.status === 200 ? true : undefined;
    });
    const run = processesUsing(dir);
    assert.ok(run.length >= 2, `npm and the agent it started: ${run.join(', ')}`);

    npm.kill('SIGTERM');
    await exited;
    const left = await waitFor('every process of the npm start run to end', () => {
      const live = processesUsing(dir);
      return live.length === 0 ? live : undefined;
    }).catch((error: Error) => {
      throw new Error(`${error.message}; still running: ${processesUsing(dir).join(', ')}; log:\n${output}`);
    });
    assert.deepEqual(left, []);
    assert.match(output, /"msg":"stopped"/, output);
    assert.equal(existsSync(socket), false, 'the socket is removed');
    // The locks are free: an agent takes the same state directory and socket.
    const next = await startAgent({ dir });
    assert.equal(await next.stop(), 0);
  });
});
