/**
 * The wall clock never decides which came first: an NTP step back between an ADD and a DEL the
 * real plugin journals while the agent is down must not strand the address. The plugin is the
 * installed executable, on the real clocks; the agent runs in this process on the real monotonic
 * clock and boot ID but a wall clock an hour ahead of the plugin's, which is what the two see when
 * NTP steps the wall clock back an hour between the ADD and the DEL.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { resolveAgentOptions } from '../../src/agent/settings/options.ts';
import { type Clock, systemClock } from '../../src/core/clock.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { decodeEntry } from '../../src/cni/journal-entry.ts';
import { warren } from '../helpers/cni.ts';
import { removeDir, tempDir, waitFor } from '../helpers/processes.ts';
import { silentLogger } from '../helpers/logger.ts';

const HOUR = 3_600_000;

/** The system's clocks with the wall clock an hour ahead: the agent's view before NTP stepped it back. */
const anHourAhead: Clock = {
  now: () => Date.now() + HOUR,
  monotonic: () => systemClock.monotonic(),
  get boot() {
    return systemClock.boot;
  },
  setTimer: (ms, fn) => systemClock.setTimer(ms, fn),
};

describe('journaled DEL after an NTP step back', {
  skip: systemClock.boot === undefined ? 'no boot ID on this host' : false,
}, () => {
  const dir = tempDir('warren-clockstep-');
  const socket = join(dir, 'warren.sock');
  const journal = join(dir, 'journal');
  let agent: Agent | undefined;
  after(async () => {
    await agent?.stop();
    removeDir(dir);
  });

  const start = async (): Promise<void> => {
    const options = resolveAgentOptions(
      {
        stateDir: dir,
        socket,
        nodeName: 'clockstep-node',
        journalDir: journal,
        netnsDirs: '',
        containerd: 'off',
        warmUpRounds: '0',
      },
      {},
    );
    agent = new Agent(options, { clock: anHourAhead, logger: silentLogger });
    await agent.start();
  };
  const held = async (): Promise<Allocation[]> =>
    (await requestJson({ socket, method: 'GET', path: '/v1/allocations?containerID=clockstep-1' }))
      .body as Allocation[];
  const conf = {
    cniVersion: '1.0.0',
    name: 'clockstep-net',
    ipam: { type: 'warren', socket, journal_dir: journal, range: '10.223.7.0/24' },
  };

  it('a DEL journaled after the ADD releases the address though the wall clock was stepped back between them', async () => {
    await start();
    const add = await warren({ command: 'ADD', containerID: 'clockstep-1', netns: '/x', ifname: 'eth0', config: conf });
    assert.equal(add.code, 0, add.stdout);
    const [made] = await held();
    assert.ok(made !== undefined && made.createdAt > Date.now(), "allocated on the agent's wall clock, an hour ahead");
    await agent?.stop();
    agent = undefined;

    const del = await warren({ command: 'DEL', containerID: 'clockstep-1', netns: '/x', ifname: 'eth0', config: conf });
    assert.equal(del.code, 0, `DEL succeeds by recording its intent: ${del.stdout}`);
    const [file] = readdirSync(journal).filter((n) => n.endsWith('.release'));
    assert.ok(file !== undefined, 'the plugin journaled the DEL');
    const decoded = decodeEntry(file, readFileSync(join(journal, file), 'utf8'));
    assert.ok(
      decoded.kind === 'entry' && decoded.entry.recordedAt < made.createdAt,
      'recorded "before" the ADD by the wall clock',
    );

    await start();
    await waitFor('the journaled DEL to release the address', async () =>
      (await held()).length === 0 ? true : undefined,
    );
    await waitFor('the journal file to go', () =>
      readdirSync(journal).some((n) => n.endsWith('.release')) ? undefined : true,
    );
  });
});
