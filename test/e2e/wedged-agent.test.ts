/**
 * CNI calls against a wedged agent (issue 24, item 19): a real process whose socket accepts and
 * never answers, and Warren as installed (the native forwarder, falling back to the TypeScript
 * plugin beside it). A DEL must be journaled and succeed, and an ADD answer 11, within
 * DEL_BUDGET_MS — well inside the kubelet's 2-minute runtime request timeout. Before, the forwarder
 * waited 120 s and the plugin it fell back to asked the agent again for another 120 s.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { AGENT_ANSWER_TIMEOUT_MS, DEL_BUDGET_MS } from '../../src/api/limits.ts';
import { FORWARDER_SOURCE_DIR } from '../../scripts/build.ts';
import { warren } from '../helpers/cni.ts';
import { type MuteSocket, startMuteSocket } from '../helpers/mute-socket.ts';
import { removeDir, tempDir } from '../helpers/processes.ts';

describe('a wedged agent (accepts, never answers)', { timeout: 4 * DEL_BUDGET_MS }, () => {
  const dir = tempDir('warren-wedged-agent-');
  const socket = join(dir, 'wedged.sock');
  const journal = join(dir, 'journal');
  let mute: MuteSocket | undefined;
  after(() => {
    mute?.stop();
    removeDir(dir);
  });
  const config = {
    cniVersion: '1.0.0',
    name: 'wedgednet',
    ipam: { type: 'warren', socket, journal_dir: journal, range: '10.214.0.0/24' },
  };

  it('the forwarder waits no longer than the plugin would, and the two waits fit the DEL budget', () => {
    const header = readFileSync(join(FORWARDER_SOURCE_DIR, 'agent-exchange.h'), 'utf8');
    const forwarder = Number(/#define AGENT_EXCHANGE_TIMEOUT_MS (\d+)/.exec(header)?.[1]);
    assert.equal(forwarder, AGENT_ANSWER_TIMEOUT_MS, 'the forwarder and the plugin wait as long');
    // The fallback does not wait again; what is left covers starting it and writing the journal on a loaded node.
    assert.ok(
      AGENT_ANSWER_TIMEOUT_MS <= DEL_BUDGET_MS / 2,
      `${AGENT_ANSWER_TIMEOUT_MS} ms leaves too little of ${DEL_BUDGET_MS} ms`,
    );
    assert.ok(DEL_BUDGET_MS <= 120_000 / 2, "well inside the kubelet's 2-minute runtime request timeout");
  });

  it('a DEL is journaled and succeeds, and an ADD answers 11, within the budget rather than after two full waits', async () => {
    mute = await startMuteSocket(socket);
    const started = Date.now();
    const timed = async <T>(call: Promise<T>): Promise<{ reply: T; ms: number }> => {
      const reply = await call;
      return { reply, ms: Date.now() - started };
    };
    const [del, add] = await Promise.all([
      timed(
        warren({
          command: 'DEL',
          containerID: 'wedged-del-1',
          netns: '/var/run/netns/wedged-del',
          ifname: 'eth0',
          config,
        }),
      ),
      timed(
        warren({
          command: 'ADD',
          containerID: 'wedged-add-1',
          netns: '/var/run/netns/wedged-add',
          ifname: 'eth0',
          config,
        }),
      ),
    ]);
    assert.equal(mute.accepted(), 2, 'each call reached the wedged agent once: the fallback did not ask again');

    assert.equal(del.reply.code, 0, `DEL: ${del.reply.stdout}${del.reply.stderr}`);
    assert.ok(del.ms < DEL_BUDGET_MS, `DEL took ${del.ms} ms`);
    const recorded = readdirSync(journal).filter((name) => name !== 'rejected');
    assert.equal(recorded.length, 1, `journal: ${recorded.join(', ')}`);
    assert.match(readFileSync(join(journal, recorded[0] as string), 'utf8'), /wedged-del-1/);

    assert.equal(add.reply.code, 1, add.reply.stdout);
    assert.equal(add.reply.json?.code, 11, add.reply.stdout);
    assert.match(String(add.reply.json?.msg), new RegExp(`did not answer within ${AGENT_ANSWER_TIMEOUT_MS} ms`));
    assert.ok(add.ms < DEL_BUDGET_MS, `ADD took ${add.ms} ms`);
  });
});
