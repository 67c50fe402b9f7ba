/**
 * The missed-delete journal end to end: a DEL the agent cannot take is recorded by the real plugin
 * and released by the agent — live, while it runs, and at start for what was written while it was
 * down — and bad journal files are set aside without harm. Two DELs never share a file, intents an
 * older plugin named are still released, and the agent refuses a journal directory the plugin
 * would refuse.
 */
import assert from 'node:assert/strict';
import {
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import { encodeEntry, journalFileName, legacyJournalFileName } from '../../src/cni/journal-entry.ts';
import type { ReconcilerStatus } from '../../src/agent/release/reconciler.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { WARREN_BIN, isRoot, run, tempDir, waitFor } from '../helpers/processes.ts';

const journalStatus = async (agent: AgentHandle) =>
  (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/journal' })).body as ReconcilerStatus;
const intents = (dir: string) => readdirSync(dir).filter((n) => n.endsWith('.release'));

describe('missed-delete journal', () => {
  const agents: AgentHandle[] = [];
  after(async () => {
    for (const a of agents) await a.kill();
  });
  // A long reconcile interval: anything released quickly was released by the live watch, not a tick.
  const start = async (dir?: string) => {
    const a = await startAgent({ ...(dir === undefined ? {} : { dir }), args: ['--reconcile-interval', '3600'] });
    agents.push(a);
    return a;
  };
  const conf = (agent: AgentHandle, socket = agent.socket) => ({
    cniVersion: '1.0.0',
    name: 'jnet',
    ipam: { type: 'warren', socket, journal_dir: join(agent.dir, 'journal'), range: '10.221.0.0/24' },
  });

  it('releases a DEL recorded while the agent runs, at once, and removes the file', async () => {
    const agent = await start();
    // The pass an agent makes as it starts, over before the DEL: with an hour to the next, a
    // release is the watch's.
    const atStart = await waitFor('the pass at start', async () => (await journalStatus(agent)).lastReconcile);
    const add = await warren({
      command: 'ADD',
      containerID: 'live-1',
      netns: '/x',
      ifname: 'eth0',
      config: conf(agent),
    });
    assert.equal(add.code, 0, add.stdout);
    // This one call cannot reach the agent (wrong socket); the agent itself is up.
    const unreachable = conf(agent, join(agent.dir, 'elsewhere.sock'));
    const t0 = Date.now();
    const del = await warren({
      command: 'DEL',
      containerID: 'live-1',
      netns: '/x',
      ifname: 'eth0',
      config: unreachable,
    });
    assert.equal(del.code, 0, `DEL succeeds by recording its intent: ${del.stdout}`);
    assert.equal(del.stdout, '');
    await waitFor('the live release', async () =>
      (await agent.allocations('?containerID=live-1')).length === 0 ? true : undefined,
    );
    const elapsed = Date.now() - t0;
    await waitFor('the journal file to go', () =>
      intents(join(agent.dir, 'journal')).length === 0 ? true : undefined,
    );
    const status = await journalStatus(agent);
    assert.equal(status.releasedFromJournal, 1);
    assert.equal(
      status.lastReconcile?.at,
      atStart.at,
      'no reconcile pass ran since the one at start: the watch did it',
    );
    console.log(`# live journal release took ${elapsed} ms`);
  });

  it('records DELs while the agent is down and releases all of them when it starts', async () => {
    let agent = await start();
    const ids = ['down-1', 'down-2', 'down-3', 'down-4', 'down-5'];
    const held: string[] = [];
    for (const id of ids) {
      const r = await warren({
        command: 'ADD',
        containerID: id,
        netns: `/x/${id}`,
        ifname: 'eth0',
        config: conf(agent),
      });
      held.push(...resultAddresses(r));
    }
    const keep = await warren({
      command: 'ADD',
      containerID: 'stays',
      netns: '/x/stays',
      ifname: 'eth0',
      config: conf(agent),
    });
    assert.equal(keep.code, 0);
    await agent.stop();
    for (const id of ids) {
      const r = await warren({
        command: 'DEL',
        containerID: id,
        netns: `/x/${id}`,
        ifname: 'eth0',
        config: conf(agent),
      });
      assert.equal(r.code, 0, r.stdout);
    }
    const journal = join(agent.dir, 'journal');
    assert.equal(intents(journal).length, 5);
    assert.equal(statSync(journal).mode & 0o777, 0o700, 'journal directory is owner-only');
    for (const name of intents(journal)) {
      assert.equal(statSync(join(journal, name)).mode & 0o777, 0o600, `${name} is owner-only`);
      assert.match(readFileSync(join(journal, name), 'utf8'), /not reachable/);
    }
    agent = await start(agent.dir);
    await waitFor('every recorded DEL released', async () =>
      (await agent.allocations('?network=jnet')).length === 1 ? true : undefined,
    );
    assert.deepEqual(
      (await agent.allocations('?network=jnet')).map((a) => a.containerID),
      ['stays'],
    );
    await waitFor('the journal to empty', () => (intents(journal).length === 0 ? true : undefined));
  });

  it('refuses container IDs that could escape the journal, and writes nothing', async () => {
    const agent = await start();
    await agent.stop();
    for (const id of ['../../etc/evil', 'a/b', '..']) {
      const r = await warren({ command: 'DEL', containerID: id, netns: '/x', ifname: 'eth0', config: conf(agent) });
      assert.equal(r.code, 1);
      assert.equal(r.json?.code, 4, r.stdout);
    }
    const r = await warren({
      command: 'DEL',
      containerID: 'ok-id',
      netns: '/x',
      ifname: '../eth0',
      config: conf(agent),
    });
    assert.equal(r.json?.code, 4);
    assert.deepEqual(intents(join(agent.dir, 'journal')), []);
    assert.equal(existsSync(join(agent.dir, 'etc')), false);
  });

  it('sets bad journal files aside, reports them, keeps serving and releases nothing on their account', async () => {
    const agent = await start();
    const victim = await warren({
      command: 'ADD',
      containerID: 'victim',
      netns: '/x',
      ifname: 'eth0',
      config: conf(agent),
    });
    assert.equal(victim.code, 0);
    const journal = join(agent.dir, 'journal');
    const owner = { network: 'jnet', containerID: 'victim', ifname: 'eth0' };
    const valid = encodeEntry({ format: 1, ...owner, recordedAt: 1, reason: 'test' });
    const outside = tempDir();
    writeFileSync(join(outside, 'target'), valid);
    const bad: Record<string, () => void> = {
      'empty.release': () => writeFileSync(join(journal, 'empty.release'), ''),
      'truncated.release': () => writeFileSync(join(journal, 'truncated.release'), valid.slice(0, 30)),
      'garbage.release': () => writeFileSync(join(journal, 'garbage.release'), Buffer.from([0xff, 0x00, 0x13, 0x37])),
      'huge.release': () => writeFileSync(join(journal, 'huge.release'), `{"format":1,"pad":"${'x'.repeat(100_000)}"}`),
      'link.release': () => symlinkSync(join(outside, 'target'), join(journal, 'link.release')),
      'a..b.release': () => writeFileSync(join(journal, 'a..b.release'), valid),
      'not-a-journal-name': () => writeFileSync(join(journal, 'not-a-journal-name'), valid),
      'wrongname.release': () => writeFileSync(join(journal, 'wrongname.release'), valid),
      'subdir.release': () => mkdirSync(join(journal, 'subdir.release')),
    };
    for (const make of Object.values(bad)) make();
    await waitFor('every bad file set aside', async () => {
      const s = await journalStatus(agent);
      return s.rejected.length >= Object.keys(bad).length ? s : undefined;
    });
    const status = await journalStatus(agent);
    const reasons = Object.fromEntries(status.rejected.map((r) => [r.name, r.reason]));
    assert.match(reasons['empty.release'] ?? '', /empty/);
    assert.match(reasons['truncated.release'] ?? '', /not valid JSON/);
    assert.match(reasons['huge.release'] ?? '', /more than/);
    assert.match(reasons['link.release'] ?? '', /symbolic link/);
    assert.match(reasons['a..b.release'] ?? '', /does not match its content/);
    assert.match(reasons['subdir.release'] ?? '', /not a regular file/);
    assert.deepEqual(intents(journal), [], 'nothing left in the journal proper');
    const rejected = readdirSync(join(journal, 'rejected'));
    assert.equal(rejected.length, Object.keys(bad).length, 'set aside, not deleted');
    assert.ok(lstatSync(join(outside, 'target')).isFile(), 'a symlink target is never touched');
    assert.deepEqual(
      (await agent.allocations('?containerID=victim')).map((a) => a.address),
      resultAddresses(victim),
      'the victim keeps its address',
    );
    // A valid file with the right name is still honoured afterwards (recorded after the ADD: a
    // journaled DEL never releases an allocation made after it).
    writeFileSync(
      join(journal, journalFileName(owner)),
      encodeEntry({ format: 1, ...owner, recordedAt: Date.now(), reason: 'test' }),
    );
    await waitFor('the valid intent released', async () =>
      (await agent.allocations('?containerID=victim')).length === 0 ? true : undefined,
    );
  });
  it('records two DELs whose IDs and ifnames differ only in where "_" falls as two files, and releases both (issue 10)', async () => {
    let agent = await start();
    const owners = [
      { containerID: 'a_b', ifname: 'c' },
      { containerID: 'a', ifname: 'b_c' },
    ];
    for (const o of owners) {
      const r = await warren({ command: 'ADD', ...o, netns: '/x', config: conf(agent) });
      assert.equal(r.code, 0, r.stdout);
    }
    await agent.stop();
    for (const o of owners) {
      const r = await warren({ command: 'DEL', ...o, netns: '/x', config: conf(agent) });
      assert.equal(r.code, 0, r.stdout);
    }
    const journal = join(agent.dir, 'journal');
    assert.equal(intents(journal).length, 2, `one file per DEL: ${intents(journal).join(', ')}`);
    agent = await start(agent.dir);
    await waitFor('both DELs released', async () =>
      (await agent.allocations('?network=jnet')).length === 0 ? true : undefined,
    );
    await waitFor('the journal to empty', () => (intents(journal).length === 0 ? true : undefined));
  });

  it('releases an intent an older plugin wrote under its old file name', async () => {
    const agent = await start();
    const add = await warren({
      command: 'ADD',
      containerID: 'from-old-plugin',
      netns: '/x',
      ifname: 'eth0',
      config: conf(agent),
    });
    assert.equal(add.code, 0, add.stdout);
    const owner = { network: 'jnet', containerID: 'from-old-plugin', ifname: 'eth0' };
    const journal = join(agent.dir, 'journal');
    writeFileSync(
      join(journal, legacyJournalFileName(owner)),
      encodeEntry({ format: 1, ...owner, recordedAt: Date.now(), reason: 'written before the upgrade' }),
      { mode: 0o600 },
    );
    await waitFor('the old intent released', async () =>
      (await agent.allocations('?containerID=from-old-plugin')).length === 0 ? true : undefined,
    );
    await waitFor('its file removed', () => (intents(journal).length === 0 ? true : undefined));
  });

  it("refuses to start on a journal directory that is a symlink into another user's directory, naming it (issue 10)", {
    skip: isRoot() ? false : 'needs root to chown',
  }, async () => {
    const root = tempDir();
    const theirs = join(root, 'theirs');
    mkdirSync(theirs, { mode: 0o755 });
    chownSync(theirs, 65534, 65534);
    const link = join(root, 'journal');
    symlinkSync(theirs, link);
    const dir = tempDir('warren-agent-');
    const r = await run(process.execPath, [
      WARREN_BIN,
      'agent',
      '--state-dir',
      dir,
      '--journal-dir',
      link,
      '--socket',
      join(dir, 'w.sock'),
      '--containerd',
      'off',
      '--netns-dirs',
      '',
    ]);
    assert.notEqual(r.code, 0);
    assert.ok(
      `${r.stdout}${r.stderr}`.includes(`journal directory ${link} is a symbolic link to ${theirs}`),
      r.stdout + r.stderr,
    );
    assert.equal(statSync(theirs).mode & 0o777, 0o755, 'the target is not chmodded');
    assert.deepEqual(readdirSync(theirs), []);
  });
});
