/**
 * The install is self-contained: `warren install --cni-bin-dir DIR` (a copy of Node, not a link)
 * serves ADD, DEL and an agent-down DEL on a node that has no Node.js. The calls run in a private
 * mount namespace where every Node of this machine is masked (/dev/null bound over it) and PATH
 * names none; the agent runs normally outside. The agent-down DEL is journaled, which only the
 * TypeScript plugin does: the forwarder ran it on the Node it carries.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildPlugin } from '../../scripts/build.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { CHILD_PATH, REPO, WARREN_BIN, isRoot, run, tempDir } from '../helpers/processes.ts';

/** PATH on a node without Node.js: the system's directories, no Node's. */
const BARE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Every Node executable this machine has where a PATH or a shebang would find one, resolved. */
function nodesOnThisMachine(): string[] {
  const found = new Set<string>([realpathSync(process.execPath)]);
  const candidates = ['/usr/local/bin/node', '/usr/bin/node', '/bin/node', '/usr/local/sbin/node', '/usr/sbin/node'];
  const which = spawnSync('which', ['-a', 'node'], { env: { PATH: `${CHILD_PATH}:${BARE_PATH}` }, encoding: 'utf8' });
  candidates.push(...which.stdout.split('\n').filter((line) => line !== ''));
  for (const path of candidates) if (existsSync(path)) found.add(realpathSync(path));
  return [...found];
}

/** `command` with `args` in a private mount namespace where every Node of the machine is masked. */
function withoutNode(masked: readonly string[], command: string, args: readonly string[]): [string, string[]] {
  const mounts = masked.map((path) => `mount --bind /dev/null '${path}'`).join(' && ');
  return [
    'unshare',
    ['--mount', '--propagation', 'private', 'sh', '-c', `${mounts} && exec "$@"`, 'sh', command, ...args],
  ];
}

describe('installed on a node without Node.js', {
  skip: isRoot() ? false : 'needs root for a private mount namespace',
}, () => {
  let agent: AgentHandle;
  let bin: string;
  let journal: string;
  let masked: string[];
  before(async () => {
    buildPlugin();
    bin = tempDir('warren-nonode-');
    const installed = spawnSync(process.execPath, [WARREN_BIN, 'install', '--cni-bin-dir', bin, '--json'], {
      cwd: REPO,
      env: { PATH: CHILD_PATH },
      encoding: 'utf8',
    });
    assert.equal(installed.status, 0, installed.stderr);
    const report = JSON.parse(installed.stdout) as { installed: Array<{ path: string; kind: string }> };
    assert.deepEqual(
      report.installed.map((f) => [f.path, f.kind]),
      [
        [join(bin, 'warren.d', 'node'), 'copy'],
        [join(bin, 'warren.d', 'warren.cjs'), 'copy'],
        [join(bin, 'warren'), 'copy'],
      ],
    );
    journal = join(tempDir('warren-nonode-journal-'), 'journal');
    masked = nodesOnThisMachine();
    agent = await startAgent();
  });
  after(async () => {
    await agent.stop();
  });

  const call = async (command: string, id: string, socket: string) => {
    const config = { cniVersion: '1.1.0', name: 'nonode', ipam: { type: 'warren', socket, range: '10.96.0.0/24' } };
    const [exe, args] = withoutNode(masked, join(bin, 'warren'), []);
    return run(exe, args, {
      env: {
        PATH: BARE_PATH,
        CNI_COMMAND: command,
        CNI_CONTAINERID: id,
        CNI_NETNS: `/var/run/netns/${id}`,
        CNI_IFNAME: 'eth0',
        CNI_PATH: bin,
        WARREN_JOURNAL_DIR: journal,
      },
      stdin: JSON.stringify(config),
    });
  };

  it('masks every Node of the machine in the namespace, and the installed one still runs', () => {
    assert.ok(masked.includes(realpathSync('/usr/local/bin/node')) || !existsSync('/usr/local/bin/node'));
    for (const node of ['node', '/usr/local/bin/node', '/usr/bin/node', ...masked]) {
      const [exe, args] = withoutNode(masked, 'sh', ['-c', `${node} -e 0`]);
      const r = spawnSync(exe, args, { env: { PATH: BARE_PATH }, encoding: 'utf8' });
      assert.notEqual(r.status, 0, `${node} runs in the namespace: ${r.stdout}${r.stderr}`);
    }
    const [exe, args] = withoutNode(masked, join(bin, 'warren.d', 'node'), ['-p', 'process.version']);
    assert.equal(execFileSync(exe, args, { env: { PATH: BARE_PATH }, encoding: 'utf8' }).trim(), process.version);
  });

  it('serves ADD and DEL through the forwarder', async () => {
    const add = await call('ADD', 'nonode-1', agent.socket);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    const [address] = (JSON.parse(add.stdout) as { ips: Array<{ address: string }> }).ips;
    assert.deepEqual(
      (await agent.allocations('?containerID=nonode-1')).map((a) => `${a.address}/24`),
      [address?.address],
    );
    const del = await call('DEL', 'nonode-1', agent.socket);
    assert.deepEqual([del.code, del.stdout, del.stderr], [0, '', '']);
    assert.deepEqual(await agent.allocations('?containerID=nonode-1'), []);
  });

  it('journals a DEL with the agent down, on the Node it carries', async () => {
    const down = join(tempDir(), 'gone.sock');
    const del = await call('DEL', 'nonode-2', down);
    assert.deepEqual([del.code, del.stdout, del.stderr], [0, '', '']);
    assert.deepEqual(
      readdirSync(journal).filter((n) => n.endsWith('.release')),
      ['nonode-2~eth0~nonode.release'],
    );
    // And an ADD with the agent down is the TypeScript plugin's 11, in its words.
    const add = await call('ADD', 'nonode-3', down);
    assert.equal(add.code, 1);
    const error = JSON.parse(add.stdout) as { code: number; msg: string };
    assert.equal(error.code, 11);
    assert.match(error.msg, /is not reachable \(ENOENT\): is `warren agent` running\?/);
  });
});
