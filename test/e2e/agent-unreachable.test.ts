/**
 * What the runtime shows when the agent is not there (issue 10): the real plugin executable, no
 * agent. The error says once what to do and names the system error once, so the line a runtime
 * prints (msg, then details) reads as one sentence, not an echo.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { warren } from '../helpers/cni.ts';
import { tempDir } from '../helpers/processes.ts';

const HINT = 'is `warren agent` running? the runtime will retry';

function count(text: string, part: string): number {
  return text.split(part).length - 1;
}

describe('agent unreachable', () => {
  const socket = join(tempDir(), 'no-agent.sock');
  const conf = (cniVersion: string) => ({
    cniVersion,
    name: 'downnet',
    ipam: { type: 'warren', socket, range: '10.213.0.0/24' },
  });

  it('answers an ADD with the hint once and the errno once, not the errno repeated in msg and details', async () => {
    const add = await warren({
      command: 'ADD',
      containerID: 'down-1',
      netns: '/var/run/netns/down',
      ifname: 'eth0',
      config: conf('1.0.0'),
    });
    assert.equal(add.code, 1);
    assert.equal(add.json?.code, 11, add.stdout);
    const msg = String(add.json?.msg);
    const shown = `${msg}; ${String(add.json?.details ?? '')}`;
    assert.match(msg, new RegExp(`Warren agent at ${socket} is not reachable`));
    assert.equal(count(msg, HINT), 1, msg);
    assert.equal(count(msg, 'ENOENT'), 1, msg);
    assert.equal(count(shown, 'ENOENT'), 1, shown);
  });

  it('answers STATUS with not ready (50) and the same hint', async () => {
    const status = await warren({ command: 'STATUS', config: conf('1.1.0') });
    assert.equal(status.json?.code, 50, status.stdout);
    assert.equal(count(String(status.json?.msg), HINT), 1);
  });
});
