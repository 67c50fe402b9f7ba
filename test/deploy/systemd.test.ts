/**
 * deploy/systemd/warren.service, the agent on a host without Kubernetes: systemd's own checker
 * accepts it (`systemd-analyze verify`, with ExecStart pointed at this checkout's bin/warren, as
 * the unit's header installs it), and the command it runs, with the environment it sets, starts an
 * agent that serves and stops cleanly on the unit's KillSignal. The
 * unit's system paths are swapped for a private directory here (other agents may own /run/warren).
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { REPO, WARREN_BIN, run, tempDir } from '../helpers/processes.ts';

const UNIT = join(REPO, 'deploy', 'systemd', 'warren.service');
const text = readFileSync(UNIT, 'utf8');

/** Every `Key=value` of the unit's [Service] section, in order. */
const service = (() => {
  const body = text.split(/^\[Service\]$/m)[1]?.split(/^\[/m)[0] ?? '';
  return [...body.matchAll(/^([A-Za-z]+)=(.*)$/gm)].map((m) => [m[1] ?? '', m[2] ?? ''] as const);
})();
const values = (key: string) => service.filter(([k]) => k === key).map(([, v]) => v);

describe('the systemd unit', () => {
  const agents: AgentHandle[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
  });

  it("passes systemd's own verification", async () => {
    const dir = tempDir('warren-unit-');
    const unit = join(dir, 'warren.service');
    writeFileSync(unit, text.replace(/^ExecStart=\/usr\/local\/bin\/warren /m, `ExecStart=${WARREN_BIN} `));
    const verified = await run('systemd-analyze', ['verify', unit]);
    assert.equal(verified.code, 0, verified.stdout + verified.stderr);
    assert.equal(verified.stderr.trim(), '', 'no warning either');
  });

  it('runs `warren agent` as root, restarts it, stops it with SIGTERM and reads overrides from /etc/default/warren', () => {
    assert.deepEqual(values('ExecStart'), ['/usr/local/bin/warren agent']);
    assert.deepEqual(values('KillSignal'), ['SIGTERM']);
    assert.deepEqual(values('Restart'), ['always']);
    assert.deepEqual(values('EnvironmentFile'), ['-/etc/default/warren']);
    assert.equal(values('User').length, 0, 'root: its socket and journal are root-owned paths');
    assert.deepEqual(values('NoNewPrivileges'), ['yes']);
  });

  it('starts, with the environment it sets, an agent that serves and stops cleanly on SIGTERM', async () => {
    const dir = tempDir('warren-unit-agent-');
    const env: Record<string, string> = {};
    for (const line of values('Environment')) {
      const [key = '', ...rest] = line.split('=');
      env[key] = rest.join('=');
    }
    assert.deepEqual(Object.keys(env).sort(), [
      'WARREN_JOURNAL_DIR',
      'WARREN_LOG_LEVEL',
      'WARREN_SOCKET',
      'WARREN_STATE_DIR',
    ]);
    const local = {
      ...env,
      WARREN_STATE_DIR: dir,
      WARREN_SOCKET: join(dir, 'warren.sock'),
      WARREN_JOURNAL_DIR: join(dir, 'journal'),
    };
    const [, ...args] = (values('ExecStart')[0] ?? '').split(' ');
    const agent = await startAgent({ dir, entry: [WARREN_BIN, ...args], env: local });
    agents.push(agent);
    const status = await run(process.execPath, [WARREN_BIN, 'status', '--json', '--socket', agent.socket]);
    assert.equal(status.code, 0, status.stderr);
    // A clean stop on the unit's KillSignal (its TimeoutStopSec only bounds a hang, as here).
    assert.equal(await agent.stop(), 0);
  });
});
