/**
 * `warren journal` as text, in process, against an agent stand-in that answers /v1/journal with
 * what the agent reports while a journal file cannot be read (test/sources/missed-delete-journal
 * shows the journal reporting it and reading it again): the pending list is empty and the file is
 * listed as not read yet, with why.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { ReconcilerStatus } from '../../src/api/status.ts';
import { runCli } from '../../src/cli/main.ts';
import { tempDir } from '../helpers/processes.ts';

/** Serves `status` on /v1/journal from a socket in a temp dir; returns the socket. */
async function agentAnswering(status: ReconcilerStatus): Promise<{ socket: string; close: () => Promise<void> }> {
  const socket = join(tempDir('warren-journal-cli-'), 'agent.sock');
  const server = createServer((req, res) => {
    const found = req.url === '/v1/journal';
    const body = JSON.stringify(found ? status : { error: { code: 'NOT_FOUND', message: `no ${req.url}` } });
    // With its length, as the agent answers: the client reads no chunked bodies.
    res.writeHead(found ? 200 : 404, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return { socket, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

async function journalText(socket: string): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await runCli(['journal', '--socket', socket], {
    out: (t) => (out += t),
    err: (t) => (out += t),
    env: {},
  });
  return { code, out };
}

const NAME = 'c1~eth0~net.release';
const base = (journalDir: string): ReconcilerStatus => ({
  journalDir,
  listed: true,
  pending: [],
  rejected: [],
  unread: [],
  releasedFromJournal: 0,
  recentErrors: [],
});

describe('warren journal', () => {
  const closing: Array<() => Promise<void>> = [];
  after(async () => {
    for (const close of closing) await close();
  });

  it('does not say "0 pending" alone while a journal file waits to be read again: it names the file and why', async () => {
    const dir = tempDir('warren-journal-dir-');
    writeFileSync(join(dir, NAME), '{}');
    const message = `journal ${join(dir, NAME)} could not be opened: EMFILE: too many open files; will try again on the next rescan`;
    const agent = await agentAnswering({
      ...base(dir),
      unread: [{ name: NAME, error: message }],
      recentErrors: [{ at: '2030-01-01T00:00:00.000Z', message }],
    });
    closing.push(agent.close);
    const { code, out } = await journalText(agent.socket);
    assert.equal(code, 0, out);
    assert.match(out, /: 0 pending, 1 not read yet, 0 released since start/);
    assert.match(out, /1 file the agent has not read yet; it reads it again on its next pass/);
    const row = out.split('\n').find((line) => line.startsWith(NAME));
    assert.match(row ?? '', /could not be opened: EMFILE/, out);
  });

  it('lists neither a pending file nor one whose old error is gone with it', async () => {
    const dir = tempDir('warren-journal-dir-');
    writeFileSync(join(dir, NAME), '{}');
    const gone = 'c2~eth0~net.release';
    const agent = await agentAnswering({
      ...base(dir),
      pending: [
        {
          name: NAME,
          network: 'net',
          containerID: 'c1',
          ifname: 'eth0',
          failures: 1,
          nextAttemptAt: '2030-01-01T00:00:01.000Z',
          lastError: 'store busy',
        },
      ],
      recentErrors: [
        {
          at: '2030-01-01T00:00:00.000Z',
          message: `journal ${join(dir, gone)} could not be read: EIO; will try again on the next rescan`,
        },
      ],
    });
    closing.push(agent.close);
    const { out } = await journalText(agent.socket);
    assert.match(out, /: 1 pending, 0 released since start/);
    assert.doesNotMatch(out, /not read yet/);
    assert.doesNotMatch(out, new RegExp(gone));
  });
});
