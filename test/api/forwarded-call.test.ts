/**
 * POST /v1/cni answered as stdout (`X-Warren-Answer: stdout`), in process: what the native
 * forwarder asks. For every call the agent can answer, the answer is exactly the bytes and exit
 * code of the TypeScript plugin for the same call (run in process against the same agent); every
 * other call is handed back to the plugin with a reason, never answered differently.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { WarrenError } from '../../src/core/errors.ts';
import { MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, MAX_REQUEST_BYTES } from '../../src/api/limits.ts';
import { parseCniEnv } from '../../src/cni/args.ts';
import { cniRequestText } from '../../src/api/cni-call.ts';
import { splitCniRequest } from '../../src/api/forwarded-call.ts';
import { stdoutOf } from '../../src/api/cni-stdout.ts';
import { runPlugin } from '../../src/plugin/plugin.ts';
import { tempDir } from '../helpers/processes.ts';
import { type Harness, harness } from './harness.ts';

interface RawAnswer {
  readonly status: number;
  readonly exit: string | undefined;
  readonly fallback: string | undefined;
  readonly body: string;
}

/** One request with the forwarder's header; the answer as bytes and headers. */
function forwarded(socket: string, body: string | Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath: socket,
        method: 'POST',
        path: '/v1/cni',
        headers: { 'x-warren-answer': 'stdout', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            exit: res.headers['x-warren-exit'] as string | undefined,
            fallback: res.headers['x-warren-fallback'] as string | undefined,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

type Vars = Partial<
  Record<'CNI_COMMAND' | 'CNI_CONTAINERID' | 'CNI_NETNS' | 'CNI_IFNAME' | 'CNI_ARGS', string | undefined>
>;

/** The body as the forwarder writes it: the variables it was given as strings, then the stdin bytes. */
function forwarderBody(vars: Vars, stdin: string): string {
  const envelope: Record<string, string> = {};
  const names = [
    ['command', 'CNI_COMMAND'],
    ['args', 'CNI_ARGS'],
    ['containerID', 'CNI_CONTAINERID'],
    ['netns', 'CNI_NETNS'],
    ['ifname', 'CNI_IFNAME'],
  ] as const;
  for (const [field, name] of names) if (vars[name] !== undefined) envelope[field] = vars[name];
  const head = JSON.stringify(envelope);
  return `${head === '{}' ? '{' : `${head.slice(0, -1)},`}"config":${stdin}}`;
}

describe('POST /v1/cni answered as stdout (the forwarder)', () => {
  let h: Harness;
  let journal: string;
  before(async () => {
    h = await harness();
    journal = join(tempDir('warren-fwd-'), 'journal');
  });
  after(async () => {
    await h.close();
  });

  const conf = (extra: Record<string, unknown> = {}, ipam: Record<string, unknown> = {}) =>
    JSON.stringify({
      cniVersion: '1.1.0',
      name: 'fwdnet',
      ipam: { type: 'warren', socket: h.socket, range: '10.79.0.0/24', ...ipam },
      ...extra,
    });
  const attachment = (command: string, id: string): Vars => ({
    CNI_COMMAND: command,
    CNI_CONTAINERID: id,
    CNI_NETNS: `/var/run/netns/${id}`,
    CNI_IFNAME: 'eth0',
    CNI_ARGS: `K8S_POD_NAMESPACE=ns;K8S_POD_NAME=${id}`,
  });

  /** The TypeScript plugin on the same call, in process, against the same agent. */
  async function plugin(vars: Vars, stdin: string): Promise<{ code: number; out: string }> {
    let out = '';
    const code = await runPlugin({
      env: { ...vars, WARREN_SOCKET: h.socket, WARREN_JOURNAL_DIR: journal },
      stdin: async () => stdin,
      write: (t) => (out += t),
    });
    return { code, out };
  }

  /** The forwarder's answer printed, and the plugin's the same bytes and exit code. */
  async function printsAsThePlugin(vars: Vars, stdin: string): Promise<RawAnswer> {
    const answer = await forwarded(h.socket, forwarderBody(vars, stdin));
    assert.equal(answer.status, 200);
    assert.equal(answer.fallback, undefined, `handed back: ${answer.fallback}`);
    const alone = await plugin(vars, stdin);
    assert.deepEqual({ code: Number(answer.exit), out: answer.body }, alone);
    return answer;
  }

  async function handedBack(vars: Vars, stdin: string | Buffer, reason: string): Promise<void> {
    const answer = await forwarded(h.socket, typeof stdin === 'string' ? forwarderBody(vars, stdin) : stdin);
    assert.deepEqual([answer.status, answer.fallback, answer.exit, answer.body], [200, reason, undefined, '']);
  }

  it('prints an ADD result exactly as the plugin does (a retried ADD is the same answer), exit 0', async () => {
    const answer = await printsAsThePlugin(attachment('ADD', 'fwd-1'), conf());
    assert.equal(answer.exit, '0');
    assert.match(JSON.parse(answer.body).ips[0].address, /^10\.79\.0\.\d+\/24$/);
    assert.equal(answer.body, JSON.stringify(JSON.parse(answer.body)), 'the body is the JSON text itself');
    // In an older version's shape too.
    await printsAsThePlugin(attachment('ADD', 'fwd-old'), conf({ cniVersion: '0.3.1' }));
  });

  it('prints nothing for a silent outcome (CHECK, DEL, GC, STATUS), exit 0', async () => {
    await printsAsThePlugin(attachment('ADD', 'fwd-2'), conf());
    for (const command of ['CHECK', 'DEL', 'GC', 'STATUS']) {
      const answer = await printsAsThePlugin(attachment(command, 'fwd-2'), conf());
      assert.deepEqual([answer.exit, answer.body], ['0', ''], command);
    }
  });

  it('prints a CNI error object exactly as the plugin does, exit 1', async () => {
    const cases: Array<[Vars, string, number]> = [
      [attachment('ADD', 'fwd-bad'), conf({}, { range: 24 }), 7],
      [attachment('ADD', 'fwd-bad'), conf({}, { rnage_start: '10.79.0.5' }), 7],
      [attachment('ADD', 'fwd-bad'), conf({ cniVersion: '0.2.0' }), 1],
      [attachment('CHECK', 'fwd-bad'), conf({ cniVersion: '0.3.1' }), 1],
      [attachment('CHECK', 'fwd-nobody'), conf(), 102],
      [attachment('DEL', 'fwd-bad'), '[1,2]', 7],
      [{ ...attachment('ADD', 'fwd-bad'), CNI_ARGS: 'IP=192.0.2.9' }, conf(), 101],
      [{ ...attachment('ADD', 'fwd-bad'), CNI_ARGS: 'FOO=bar' }, conf({ cniVersion: '0.4.0' }), 4],
    ];
    for (const [vars, stdin, code] of cases) {
      const answer = await printsAsThePlugin(vars, stdin);
      assert.equal(answer.exit, '1');
      assert.equal(JSON.parse(answer.body).code, code, answer.body);
    }
  });

  it('prints bad CNI variables as the plugin does: in the spec version, whatever the config says, and whatever the config is', async () => {
    const cases: Vars[] = [
      { ...attachment('SMASH', 'fwd-env') },
      { ...attachment('ADD', '../../etc/passwd') },
      { ...attachment('ADD', 'fwd-env'), CNI_CONTAINERID: undefined },
      { ...attachment('ADD', 'fwd-env'), CNI_IFNAME: '' },
      { ...attachment('ADD', 'fwd-env'), CNI_IFNAME: 'x'.repeat(16) },
      { ...attachment('ADD', 'fwd-env'), CNI_NETNS: undefined },
      { ...attachment('CHECK', 'fwd-env'), CNI_NETNS: '' },
    ];
    for (const vars of cases) {
      for (const stdin of [
        conf({ cniVersion: '0.4.0' }),
        '{not json',
        `${'['.repeat(MAX_CONFIG_DEPTH + 5)}${']'.repeat(MAX_CONFIG_DEPTH + 5)}`,
      ]) {
        const answer = await printsAsThePlugin(vars, stdin);
        const error = JSON.parse(answer.body);
        assert.deepEqual([answer.exit, error.code, error.cniVersion], ['1', 4, '1.1.0'], answer.body);
      }
    }
  });

  it('answers VERSION as the plugin does, before looking at the config', async () => {
    for (const stdin of [conf(), '', 'garbage', `${'['.repeat(5000)}`]) {
      const answer = await printsAsThePlugin({ CNI_COMMAND: 'VERSION' }, stdin);
      assert.ok(JSON.parse(answer.body).supportedVersions.includes('1.1.0'));
    }
  });

  it('prints STATUS 50 while the store is not usable, as the plugin does', async () => {
    h.store.pingFault = new Error('database is locked');
    try {
      const answer = await printsAsThePlugin({ CNI_COMMAND: 'STATUS' }, conf());
      assert.equal(JSON.parse(answer.body).code, 50);
    } finally {
      h.store.pingFault = undefined;
    }
  });

  it('hands a DEL the agent could not commit (11 or 5) back to the plugin, which journals it', async () => {
    await printsAsThePlugin(attachment('ADD', 'fwd-del'), conf());
    for (const fault of [new WarrenError('TRY_AGAIN', 'store busy'), new Error('disk on fire')]) {
      h.store.commitFault = fault;
      try {
        await handedBack(attachment('DEL', 'fwd-del'), conf(), 'del-not-committed');
        // An ADD that cannot commit is printed (11): only a DEL has a promise to keep.
        const add = await printsAsThePlugin(attachment('ADD', 'fwd-del-add'), conf());
        assert.ok([5, 11].includes(JSON.parse(add.body).code), add.body);
        assert.deepEqual(await plugin(attachment('DEL', 'fwd-del'), conf()), { code: 0, out: '' });
      } finally {
        h.store.commitFault = undefined;
      }
    }
    assert.equal(readdirSync(journal).filter((n) => n.endsWith('.release')).length, 1, 'one intent per attachment');
    h.failures.length = 0;
  });

  it('hands back a config nested past the depth limit, for every command but VERSION', async () => {
    const deep = `${conf().slice(0, -1)},"x":${'['.repeat(MAX_CONFIG_DEPTH + 1)}${']'.repeat(MAX_CONFIG_DEPTH + 1)}}`;
    for (const command of ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS'])
      await handedBack(attachment(command, 'fwd-deep'), deep, 'config-too-deep');
    // One level less is the agent's to answer.
    const fits = `${conf().slice(0, -1)},"x":${'['.repeat(MAX_CONFIG_DEPTH - 1)}${']'.repeat(MAX_CONFIG_DEPTH - 1)}}`;
    await printsAsThePlugin(attachment('ADD', 'fwd-deep'), fits);
  });

  it('hands back a config that is not JSON on its own, even when the body around it would parse', async () => {
    await handedBack(attachment('ADD', 'fwd-json'), '{"cniVersion": "1.0.0", ', 'config-not-json');
    await handedBack(attachment('ADD', 'fwd-json'), '', 'config-not-json');
    // Text after the config that would make the body a different request: the plugin says 6.
    await handedBack(attachment('ADD', 'fwd-json'), `${conf()}, "command": "DEL"`, 'config-not-json');
    await handedBack(attachment('ADD', 'fwd-json'), `\uFEFF${conf()}`, 'config-not-json');
  });

  it('hands back a call without CNI_COMMAND (the executable may be the command line)', async () => {
    await handedBack({ CNI_CONTAINERID: 'fwd-x', CNI_IFNAME: 'eth0' }, conf(), 'no-command');
    await handedBack({ CNI_COMMAND: '' }, conf(), 'no-command');
  });

  it('hands back a body that is not the plugin request, never guessing', async () => {
    const bodies = [
      'garbage',
      '',
      '[]',
      '{"command":"ADD"}',
      '{"command":"ADD","config":{"a":1} ',
      '{"command":5,"config":{}}',
      '{"command":"ADD","colour":"red","config":{}}',
      '{"command":"ADD","command":"DEL","config":{}}',
      '{"command":"ADD" "config":{}}',
      '{"command":"ADD\\u0000,"config":{}}',
    ];
    for (const body of bodies) await handedBack({}, Buffer.from(body), 'unreadable-request');
  });

  it('answers a config just under the stdin limit, and hands back one past it (the plugin refuses it with 6)', async () => {
    const padded = (bytes: number): string => {
      const base = conf();
      return `${base.slice(0, -1)},"pad":"${'x'.repeat(bytes - base.length - 9)}"}`;
    };
    assert.equal(Buffer.byteLength(padded(MAX_CONFIG_BYTES)), MAX_CONFIG_BYTES);
    await printsAsThePlugin(attachment('ADD', 'fwd-big'), padded(MAX_CONFIG_BYTES));
    await handedBack(attachment('ADD', 'fwd-big'), padded(MAX_CONFIG_BYTES + 1), 'config-too-large');
  });

  it('hands back a body past the request limit, and keeps serving', async () => {
    await handedBack(
      {},
      Buffer.from(forwarderBody(attachment('ADD', 'fwd-huge'), `"${'x'.repeat(MAX_REQUEST_BYTES)}"`)),
      'request-too-large',
    );
    await printsAsThePlugin(attachment('ADD', 'fwd-after'), conf());
  });

  it('logs none of the answers above as failures', () => {
    assert.deepEqual(h.failures, []);
  });

  it('serves the same route as JSON without the header', async () => {
    const outcome = await h.client.cni({ command: 'VERSION', config: {} });
    assert.equal(outcome.kind, 'result');
  });
});

describe('the plugin request on the wire', () => {
  it('is taken apart into the fields and the config bytes as written', () => {
    const env = parseCniEnv({
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c1',
      CNI_NETNS: '/n "x"\\',
      CNI_IFNAME: 'eth0',
      CNI_ARGS: 'K8S_POD_NAME=é',
    });
    for (const config of ['{"a":1}', ' {"a":"}\\""}\n', '', 'not json', '{"ü":"日本"}']) {
      const split = splitCniRequest(Buffer.from(cniRequestText(env, config)));
      assert.ok(split !== undefined, config);
      assert.deepEqual(split.fields, {
        command: 'ADD',
        args: 'K8S_POD_NAME=é',
        containerID: 'c1',
        netns: '/n "x"\\',
        ifname: 'eth0',
      });
      assert.equal(split.config.toString('utf8'), config);
      assert.equal(split.config.length, Buffer.byteLength(config));
    }
  });

  it('prints by one rule: result and silence exit 0, an error exits 1, a DEL not committed is the plugin’s', () => {
    const error = (code: number) => ({
      kind: 'error' as const,
      output: { cniVersion: '1.0.0', code, msg: `m${code}` },
    });
    assert.deepEqual(stdoutOf('ADD', { kind: 'result', output: { a: 1 } }), {
      kind: 'print',
      stdout: '{"a":1}',
      exitCode: 0,
    });
    assert.deepEqual(stdoutOf('DEL', { kind: 'silent' }), { kind: 'print', stdout: '', exitCode: 0 });
    assert.deepEqual(stdoutOf('ADD', error(11)), {
      kind: 'print',
      stdout: '{"cniVersion":"1.0.0","code":11,"msg":"m11"}',
      exitCode: 1,
    });
    assert.deepEqual(stdoutOf('DEL', error(7)), {
      kind: 'print',
      stdout: '{"cniVersion":"1.0.0","code":7,"msg":"m7"}',
      exitCode: 1,
    });
    for (const code of [5, 11])
      assert.deepEqual(stdoutOf('DEL', error(code)), { kind: 'plugin', reason: 'del-not-committed', why: `m${code}` });
  });
});
