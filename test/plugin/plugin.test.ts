/**
 * The plugin in process against a stand-in agent that answers what each test scripts: it prints
 * the agent's outcome as it is, and when the agent refuses the request itself (an answer that is
 * not an outcome) it answers alone with the agent's own code, or keeps a DEL's promise through the
 * journal, exactly as when the agent cannot be reached.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runPlugin } from '../../src/plugin/plugin.ts';
import { warren } from '../helpers/cni.ts';
import { tempDir } from '../helpers/processes.ts';

const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
});

/** An agent on a temp socket that answers every request with `status` and `body`; records what it got. */
async function standIn(status: number, body: unknown): Promise<{ socket: string; received: unknown[] }> {
  const socket = join(tempDir('warren-plugin-'), 'agent.sock');
  const received: unknown[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  servers.push(server);
  return { socket, received };
}

const conf = (socket: string, journal: string) => ({
  cniVersion: '1.0.0',
  name: 'pnet',
  ipam: { type: 'warren', socket, journal_dir: journal, range: '10.9.0.0/24' },
});

async function plugin(
  command: string,
  socket: string,
  journal: string,
  config: unknown = conf(socket, journal),
): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await runPlugin({
    env: {
      CNI_COMMAND: command,
      CNI_CONTAINERID: 'p1',
      CNI_IFNAME: 'eth0',
      CNI_NETNS: '/var/run/netns/p1',
      CNI_ARGS: 'K8S_POD_NAME=p',
    },
    stdin: async () => JSON.stringify(config),
    write: (t) => (out += t),
  });
  return { code, out };
}

describe('plugin against a stand-in agent', () => {
  it('sends the CNI variables and the config as the runtime wrote it, and prints a result as the agent gave it', async () => {
    const output = { cniVersion: '1.0.0', ips: [{ address: '10.9.0.5/24' }] };
    const journal = join(tempDir(), 'journal');
    const { socket, received } = await standIn(200, { kind: 'result', output });
    const r = await plugin('ADD', socket, journal);
    assert.deepEqual(r, { code: 0, out: JSON.stringify(output) });
    assert.deepEqual(received, [
      {
        command: 'ADD',
        args: 'K8S_POD_NAME=p',
        containerID: 'p1',
        netns: '/var/run/netns/p1',
        ifname: 'eth0',
        config: conf(socket, journal),
      },
    ]);
  });

  it('prints a CNI error outcome and exits 1', async () => {
    const error = { cniVersion: '1.0.0', code: 100, msg: 'pool exhausted' };
    const { socket } = await standIn(200, { kind: 'error', output: error });
    assert.deepEqual(await plugin('ADD', socket, join(tempDir(), 'journal')), { code: 1, out: JSON.stringify(error) });
  });

  it("answers a refused request with the agent's own code and message (TOO_LARGE is CNI 6)", async () => {
    const { socket } = await standIn(413, {
      error: { code: 'TOO_LARGE', message: 'request body is larger than 6291456 bytes' },
    });
    const r = await plugin('ADD', socket, join(tempDir(), 'journal'));
    assert.equal(r.code, 1);
    assert.deepEqual(JSON.parse(r.out), {
      cniVersion: '1.0.0',
      code: 6,
      msg: 'request body is larger than 6291456 bytes',
    });
  });

  it('answers an agent that is not Warren (no error answer) with code 5 naming the status', async () => {
    const { socket } = await standIn(502, '<html>bad gateway</html>');
    const r = await plugin('CHECK', socket, join(tempDir(), 'journal'));
    assert.equal(r.code, 1);
    assert.equal(JSON.parse(r.out).code, 5);
    assert.match(JSON.parse(r.out).msg, /answered HTTP 502 without an error/);
  });

  it('names what an answer that is no CNI outcome holds (an exit code above 255 as stdout), never "unknown outcome undefined"', async () => {
    // A stand-in that answers every request as stdout for the forwarder, with an exit code no
    // process can have: the forwarder hands the call to the plugin, which gets the same answer.
    const socket = join(tempDir('warren-plugin-'), 'agent.sock');
    const stdout = JSON.stringify({ cniVersion: '1.0.0', ips: [{ address: '10.9.0.7/24' }] });
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, {
          'content-type': 'application/json',
          'x-warren-exit': '300',
          'content-length': Buffer.byteLength(stdout),
        });
        res.end(stdout);
      });
    });
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    servers.push(server);
    const r = await warren({
      command: 'ADD',
      containerID: 'p300',
      netns: '/var/run/netns/p300',
      ifname: 'eth0',
      config: conf(socket, join(tempDir(), 'journal')),
    });
    assert.equal(r.code, 1, r.stdout);
    const msg = String(r.json?.msg);
    assert.doesNotMatch(msg, /undefined/);
    assert.match(
      msg,
      /answered HTTP 200 with a body that is not a CNI outcome \(no "kind"\): \{"cniVersion":"1\.0\.0","ips"/,
    );
  });

  it('checks the config itself first when the agent refused: a bad config is still 7', async () => {
    const { socket } = await standIn(500, { error: { code: 'INTERNAL', message: 'bug' } });
    const journal = join(tempDir(), 'journal');
    const r = await plugin('ADD', socket, journal, {
      ...conf(socket, journal),
      ipam: { type: 'warren', socket, range: 24 },
    });
    assert.equal(JSON.parse(r.out).code, 7);
  });

  it("keeps a refused DEL's promise through the journal", async () => {
    const { socket } = await standIn(500, { error: { code: 'INTERNAL', message: 'bug' } });
    const journal = join(tempDir(), 'journal');
    assert.deepEqual(await plugin('DEL', socket, journal), { code: 0, out: '' });
    assert.equal(readdirSync(journal).filter((n) => n.endsWith('.release')).length, 1);
  });

  it('journals a DEL the agent took but could not commit (11), and prints nothing', async () => {
    const { socket } = await standIn(200, {
      kind: 'error',
      output: { cniVersion: '1.0.0', code: 11, msg: 'store busy' },
    });
    const journal = join(tempDir(), 'journal');
    assert.deepEqual(await plugin('DEL', socket, journal), { code: 0, out: '' });
    assert.equal(readdirSync(journal).filter((n) => n.endsWith('.release')).length, 1);
  });

  it('does not journal a DEL the agent refused for a reason a retry cannot fix (7)', async () => {
    const error = { cniVersion: '1.0.0', code: 7, msg: 'bad' };
    const { socket } = await standIn(200, { kind: 'error', output: error });
    const journal = join(tempDir(), 'journal');
    assert.deepEqual(await plugin('DEL', socket, journal), { code: 1, out: JSON.stringify(error) });
    assert.equal(existsSync(journal), false);
  });
});
