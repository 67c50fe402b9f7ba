/**
 * `warren journal` with no agent answering reads the journal directory itself: what waits, what
 * the agent will set aside and why, and what is in rejected/, changing nothing there. Files others
 * could plant (a symlink, a FIFO, garbage, one too large) are shown as what they are, never
 * followed, never waited on.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { JOURNAL_FORMAT, MAX_ENTRY_BYTES, encodeEntry, journalFileName } from '../../src/cni/journal-entry.ts';
import { runCli } from '../../src/cli/main.ts';
import { tempDir } from '../helpers/processes.ts';

async function cli(argv: readonly string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (t) => (out += t), err: (t) => (err += t), env: {} });
  return { code, out, err };
}

function journal(): { dir: string; waiting: string } {
  const dir = tempDir('warren-journal-offline-');
  const owner = { network: 'net', containerID: 'c-waiting', ifname: 'eth0' };
  const waiting = journalFileName(owner);
  writeFileSync(
    join(dir, waiting),
    encodeEntry({ format: JOURNAL_FORMAT, ...owner, recordedAt: Date.UTC(2026, 10, 27), reason: 'agent unreachable' }),
  );
  writeFileSync(join(dir, 'garbage.release'), 'not json');
  writeFileSync(join(dir, 'big.release'), 'x'.repeat(MAX_ENTRY_BYTES + 1));
  symlinkSync('/etc/passwd', join(dir, 'link.release'));
  execFileSync('mkfifo', [join(dir, 'fifo.release')]);
  mkdirSync(join(dir, 'rejected'));
  writeFileSync(join(dir, 'rejected', 'old.release'), 'x');
  return { dir, waiting };
}

describe('warren journal with the agent down', () => {
  const noAgent = join(tempDir('warren-no-agent-'), 'warren.sock');

  it('shows what waits and what will be set aside, read from the directory, and changes nothing', async () => {
    const { dir, waiting } = journal();
    const before = readdirSync(dir).sort();
    const { code, out, err } = await cli(['journal', '--socket', noAgent, '--journal-dir', dir]);
    assert.equal(code, 0, err);
    assert.match(err, /the agent is not answering .*; read .* directly/);
    assert.match(out, /1 waiting for the agent; nothing is released until it runs/);
    const row = out.split('\n').find((l) => l.startsWith(waiting)) ?? '';
    assert.match(row, /net\s+c-waiting\s+eth0\s+2026-11-27T00:00:00\.000Z\s+agent unreachable/);
    for (const [file, why] of [
      ['link.release', /is a symbolic link/],
      ['fifo.release', /is a FIFO, not a regular file/],
      ['big.release', /is more than 16384 bytes/],
      ['garbage.release', /./],
    ] as const) {
      assert.match(out.split('\n').find((l) => l.startsWith(file)) ?? '', why, file);
    }
    assert.match(out, /set aside in .*rejected: old\.release/);
    assert.deepEqual(readdirSync(dir).sort(), before);
  });

  it('answers --json with the same, marked as read without the agent', async () => {
    const { dir } = journal();
    const { code, out } = await cli(['journal', '--json', '--socket', noAgent, '--journal-dir', dir]);
    assert.equal(code, 0);
    const j = JSON.parse(out) as { agent: string; pending: Array<{ containerID: string }>; unreadable: unknown[] };
    assert.equal(j.agent, 'unreachable');
    assert.deepEqual(
      j.pending.map((p) => p.containerID),
      ['c-waiting'],
    );
    assert.equal(j.unreadable.length, 4);
  });

  it('is still AGENT_UNREACHABLE, naming both, when the directory cannot be read either', async () => {
    const missing = join(tempDir('warren-journal-offline-'), 'absent');
    const { code, err } = await cli(['journal', '--socket', noAgent, '--journal-dir', missing]);
    assert.equal(code, 1);
    assert.match(err, /AGENT_UNREACHABLE: .*the journal .*absent cannot be read/);
  });
});
