/**
 * The native forwarder (src/plugin/forwarder) as a runtime runs it, against a fake agent on a temp
 * unix socket that answers what each test scripts, and a fake TypeScript plugin (a fallback
 * directory whose `node` is this Node and whose `warren.cjs` reports the stdin, environment and
 * arguments it got). Every case runs twice: the static build that is installed, and the build
 * under AddressSanitizer and UBSan, where any finding fails the case (the forwarder writes nothing
 * to stderr of its own), a block not freed by exit included, wherever its pointer lingers
 * (scripts/build.ts buildSanitized).
 *
 * What it shows: the request is the TypeScript plugin's, byte for byte; an answer with
 * X-Warren-Exit is printed exactly and its code is the exit code; anything else (a fallback
 * answer, an error status, garbage, a closed or absent agent, stdin over the limit or not a JSON
 * object, a nesting too deep) hands the exact stdin bytes and the untouched environment to the
 * plugin, whose stdout and exit code become the forwarder's; the socket comes from ipam.socket,
 * then WARREN_SOCKET, then the default.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { type Server, type Socket, createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { FORWARDER_BINARY, buildForwarder, buildForwarderSanitized } from '../../scripts/build.ts';
import { MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH } from '../../src/api/limits.ts';
import { forwardedRequest, forwardedRequestHead } from '../../src/api/cni-wire.ts';
import { CHILD_PATH, tempDir, track } from '../helpers/processes.ts';

/** One request as the agent received it. */
interface Received {
  readonly head: string;
  readonly body: Buffer;
}

interface FakeAgent {
  readonly socket: string;
  readonly received: Received[];
}

type Reply = (connection: Socket, request: Received) => void | Promise<void>;

const servers: Server[] = [];
after(() => {
  for (const server of servers) server.close();
});

/**
 * An agent on `socket` (a fresh temp path by default) that reads one request per connection and
 * replies; with `reply` 'close at accept', it closes every connection before reading anything.
 */
async function fakeAgent(
  reply: Reply | 'close at accept',
  socket = join(tempDir('warren-fwd-agent-'), 'agent.sock'),
): Promise<FakeAgent> {
  const received: Received[] = [];
  const server = createServer((connection) => {
    connection.on('error', () => undefined);
    if (reply === 'close at accept') {
      connection.destroy();
      return;
    }
    let data = Buffer.alloc(0);
    let answered = false;
    connection.on('data', (chunk: Buffer) => {
      if (answered) return;
      data = Buffer.concat([data, chunk]);
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = data.subarray(0, end + 4).toString('latin1');
      const length = /\r\nContent-Length: (\d+)\r\n/.exec(head);
      assert.ok(length !== null, `no Content-Length in ${head}`);
      if (data.length < end + 4 + Number(length[1])) return;
      answered = true;
      const request = { head, body: data.subarray(end + 4) };
      received.push(request);
      void reply(connection, request);
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  servers.push(server);
  return { socket, received };
}

/** An HTTP answer with the given status line, header lines and body. */
function http(status: string, headers: readonly string[], body: string | Buffer = ''): Buffer {
  return Buffer.concat([
    Buffer.from(`HTTP/1.1 ${status}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`, 'latin1'),
    Buffer.from(body),
  ]);
}

/** The agent's answer to print: 200, X-Warren-Exit, the body. */
function outcome(exit: number, body: string | Buffer, extra: readonly string[] = []): Buffer {
  return http(
    '200 OK',
    [
      'Content-Type: application/json',
      `X-Warren-Exit: ${exit}`,
      `Content-Length: ${Buffer.byteLength(body)}`,
      'Connection: close',
      ...extra,
    ],
    body,
  );
}

const send =
  (bytes: Buffer): Reply =>
  (connection) => {
    connection.end(bytes);
  };

/** The fallback directory: `node` is this Node, `warren.cjs` reports what it got and exits 7. */
const FAKE_PLUGIN = `
const fs = require('node:fs');
const stdin = fs.readFileSync(0);
fs.writeSync(1, JSON.stringify({ argv0: process.argv0, script: process.argv[1], args: process.argv.slice(2), stdin: stdin.toString('base64'), env: process.env }));
process.exit(7);
`;
function fallbackDir(): string {
  const dir = tempDir('warren-fwd-fallback-');
  symlinkSync(process.execPath, join(dir, 'node'));
  writeFileSync(join(dir, 'warren.cjs'), FAKE_PLUGIN);
  return dir;
}

interface Run {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: Buffer;
  readonly stderr: string;
}

/** Runs `command` with exactly `env` and `stdin`; stdout as bytes. */
function execute(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  stdin: string | Buffer,
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = track(spawn(command, args, { env, stdio: ['pipe', 'pipe', 'pipe'] }));
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (c: Buffer) => out.push(c));
    child.stderr?.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.stdin?.on('error', () => undefined); // the forwarder stops reading past its limit
    child.stdin?.end(stdin);
    child.on('close', (code, signal) =>
      resolve({ code, signal, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString('utf8') }),
    );
  });
}

/** What the fake plugin reported. */
interface PluginReport {
  readonly argv0: string;
  readonly script: string;
  readonly args: string[];
  readonly stdin: Buffer;
  readonly env: Record<string, string>;
}

function pluginReport(run: Run): PluginReport {
  assert.equal(
    run.code,
    7,
    `the fake plugin did not run: code ${run.code}, stdout ${run.stdout.toString()}, stderr ${run.stderr}`,
  );
  const report = JSON.parse(run.stdout.toString('utf8')) as Omit<PluginReport, 'stdin'> & { stdin: string };
  return { ...report, stdin: Buffer.from(report.stdin, 'base64') };
}

const CNI_VARIABLES = {
  CNI_COMMAND: 'ADD',
  CNI_CONTAINERID: 'c1',
  CNI_NETNS: '/var/run/netns/c1',
  CNI_IFNAME: 'eth0',
  CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p',
};

/** A config as a runtime writes it (indented, a final newline), naming `socket` when given. */
function config(socket?: string): string {
  const ipam: Record<string, unknown> = { type: 'warren', range: '10.9.0.0/24' };
  if (socket !== undefined) ipam.socket = socket;
  return `${JSON.stringify({ cniVersion: '1.0.0', name: 'fnet', type: 'bridge', ipam }, null, 2)}\n`;
}

/** The request body the TypeScript plugin sends for these variables and this stdin (the wire's one definition). */
function pluginBody(env: NodeJS.ProcessEnv, stdin: string | Buffer): Buffer {
  const request = forwardedRequest(env, Buffer.from(stdin));
  assert.ok(request !== undefined, 'a call the forwarder sends');
  return request.subarray(request.indexOf('\r\n\r\n') + 4);
}

function requestHead(bodyLength: number): string {
  return forwardedRequestHead(bodyLength);
}

const builds: Array<{ name: string; binary: string }> = [
  { name: 'static build', binary: FORWARDER_BINARY },
  { name: 'ASan/UBSan build', binary: '' },
];

before(() => {
  buildForwarder();
  const sanitized = join(tempDir('warren-fwd-asan-'), 'warren-forwarder-asan');
  buildForwarderSanitized(sanitized);
  (builds[1] as { binary: string }).binary = sanitized;
});

for (const build of builds) {
  describe(`forwarder (${build.name})`, () => {
    const fallback = fallbackDir();
    /** The environment of a CNI call whose agent (if none in the config) is at `socket`. */
    const cniEnv = (socket: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
      PATH: CHILD_PATH,
      WARREN_FORWARDER_FALLBACK_DIR: fallback,
      WARREN_SOCKET: socket,
      ...CNI_VARIABLES,
      ...extra,
    });
    const forward = async (
      env: NodeJS.ProcessEnv,
      stdin: string | Buffer,
      args: readonly string[] = [],
    ): Promise<Run> => {
      const run = await execute(build.binary, args, env, stdin);
      assert.equal(run.stderr, '', 'the forwarder (or a sanitizer) wrote to stderr');
      return run;
    };
    /** Runs a call that must reach the plugin with the same stdin, environment, and no arguments. */
    const fallsBack = async (env: NodeJS.ProcessEnv, stdin: string | Buffer): Promise<PluginReport> => {
      const report = pluginReport(await forward(env, stdin));
      assert.deepEqual(report.stdin, Buffer.from(stdin));
      assert.deepEqual(report.env, env);
      assert.equal(report.argv0, 'node');
      assert.equal(report.script, join(fallback, 'warren.cjs'));
      assert.deepEqual(report.args, []);
      return report;
    };

    it("sends the TypeScript plugin's request byte for byte and prints the answer exactly", async () => {
      const result =
        '{"cniVersion":"1.0.0","ips":[{"address":"10.9.0.5/24","gateway":"10.9.0.1"}],"routes":[],"dns":{}}';
      const agent = await fakeAgent(send(outcome(0, result)));
      const env = cniEnv('/nonexistent/unused.sock');
      const stdin = config(agent.socket);
      const run = await forward(env, stdin);
      assert.equal(run.code, 0);
      assert.equal(run.stdout.toString(), result);
      assert.equal(agent.received.length, 1);
      const [request] = agent.received as [Received];
      const body = pluginBody(env, stdin);
      assert.equal(request.head, requestHead(body.length));
      assert.deepEqual(request.body, body);
      assert.deepEqual(JSON.parse(request.body.toString()), {
        command: 'ADD',
        args: CNI_VARIABLES.CNI_ARGS,
        containerID: 'c1',
        netns: '/var/run/netns/c1',
        ifname: 'eth0',
        config: JSON.parse(stdin),
      });
    });

    it('exits with the code the agent names, printing the body as it is (an error, nothing, 255)', async () => {
      const error = '{"cniVersion":"1.0.0","code":7,"msg":"invalid config: unknown key \\"x\\""}\n';
      for (const [exit, body] of [
        [1, error],
        [0, ''],
        [255, 'raw \u00e9 bytes\r\n\0'],
      ] as const) {
        const agent = await fakeAgent(send(outcome(exit, body)));
        const run = await forward(cniEnv(agent.socket), config());
        assert.equal(run.code, exit);
        assert.deepEqual(run.stdout, Buffer.from(body));
      }
    });

    it('escapes the CNI variables as JSON.stringify does, omits the unset ones and sends unset CNI_ARGS as ""', async () => {
      const agent = await fakeAgent(send(outcome(0, '')));
      const cases: NodeJS.ProcessEnv[] = [
        {
          CNI_ARGS: 'K8S_POD_NAME="q\\uote"\n\ttab\x01\x1f\x7f\b\f\r é😀',
          CNI_CONTAINERID: '',
          CNI_NETNS: undefined,
          CNI_IFNAME: undefined,
        },
        { CNI_ARGS: undefined, CNI_CONTAINERID: undefined, CNI_NETNS: '', CNI_IFNAME: 'net1', CNI_COMMAND: 'DEL' },
        { CNI_COMMAND: '', CNI_ARGS: '\\', CNI_IFNAME: '"' },
      ];
      for (const extra of cases) {
        const env = cniEnv(agent.socket, extra);
        for (const key of Object.keys(env)) if (env[key] === undefined) delete env[key];
        const before = agent.received.length;
        assert.equal((await forward(env, config())).code, 0);
        const request = agent.received[before] as Received;
        assert.deepEqual(request.body, pluginBody(env, config()), JSON.stringify(extra));
        assert.equal(request.head, requestHead(request.body.length));
      }
    });

    it('takes the config as the runtime wrote it: leading white space, invalid JSON after "{", bytes that are not UTF-8', async () => {
      const agent = await fakeAgent(send(outcome(0, '')));
      const env = cniEnv(agent.socket);
      for (const stdin of [` \n\t${config()}`, '{"cniVersion":', Buffer.from('{"name":"\xff\xfe"}  ', 'latin1')]) {
        const before = agent.received.length;
        assert.equal((await forward(env, stdin)).code, 0);
        assert.deepEqual((agent.received[before] as Received).body, pluginBody(env, stdin));
      }
    });

    it('reads an answer that arrives slowly in many small pieces', async () => {
      const body = JSON.stringify({ cniVersion: '1.0.0', ips: [{ address: '10.9.0.9/24' }], pad: 'x'.repeat(3000) });
      const answer = outcome(0, body);
      const agent = await fakeAgent(async (connection) => {
        for (let i = 0; i < answer.length; i += i < 200 ? 1 : 97) {
          connection.write(answer.subarray(i, i < 200 ? i + 1 : i + 97));
          await delay(1);
        }
        connection.end();
      });
      const run = await forward(cniEnv(agent.socket), config());
      assert.equal(run.code, 0);
      assert.equal(run.stdout.toString(), body);
    });

    it('prints a large answer whole', async () => {
      const body = Buffer.alloc(3 * 1024 * 1024 + 17, 'a');
      const agent = await fakeAgent(send(outcome(0, body)));
      const run = await forward(cniEnv(agent.socket), config());
      assert.equal(run.code, 0);
      assert.ok(run.stdout.equals(body));
    });

    it("accepts the answer's head in any header case, with other headers, HTTP/1.0 and padded values", async () => {
      const heads = [
        http('200 OK', ['content-type: application/json', 'x-warren-exit: 3', 'content-length: 2', 'Date: now'], '{}'),
        Buffer.from('HTTP/1.0 200 OK\r\nX-WARREN-EXIT:\t3 \r\nCONTENT-LENGTH:  2\r\n\r\n{}'),
        Buffer.from('HTTP/1.1 200\r\nContent-Length: 2\r\nX-Warren-Exit: 003\r\n\r\n{}'),
      ];
      for (const answer of heads) {
        const agent = await fakeAgent(send(answer));
        const run = await forward(cniEnv(agent.socket), config());
        assert.equal(run.code, 3, answer.toString());
        assert.equal(run.stdout.toString(), '{}');
      }
    });

    it('hands the call to the plugin, stdin and environment untouched, whenever the agent does not answer an outcome', async () => {
      const ok = '{"cniVersion":"1.0.0"}';
      const answers: Array<[string, Reply]> = [
        ['X-Warren-Fallback', send(outcome(0, ok, ['X-Warren-Fallback: agent-cannot-answer']))],
        [
          'an empty X-Warren-Fallback',
          send(http('200 OK', ['X-Warren-Exit: 0', 'x-warren-fallback:', 'Content-Length: 2'], '{}')),
        ],
        [
          'status 500',
          send(http('500 Internal Server Error', ['X-Warren-Exit: 1', `Content-Length: ${ok.length}`], ok)),
        ],
        ['status 413', send(http('413 Payload Too Large', ['Content-Length: 2'], '{}'))],
        ['status 201', send(http('201 Created', ['X-Warren-Exit: 0', 'Content-Length: 2'], '{}'))],
        [
          'no X-Warren-Exit',
          send(http('200 OK', ['Content-Type: application/json', `Content-Length: ${ok.length}`], ok)),
        ],
        ['X-Warren-Exit 256', send(http('200 OK', ['X-Warren-Exit: 256', 'Content-Length: 2'], '{}'))],
        ['X-Warren-Exit -1', send(http('200 OK', ['X-Warren-Exit: -1', 'Content-Length: 2'], '{}'))],
        ['X-Warren-Exit not a number', send(http('200 OK', ['X-Warren-Exit: zero', 'Content-Length: 2'], '{}'))],
        ['an empty X-Warren-Exit', send(http('200 OK', ['X-Warren-Exit:', 'Content-Length: 2'], '{}'))],
        [
          'two X-Warren-Exit',
          send(http('200 OK', ['X-Warren-Exit: 0', 'X-Warren-Exit: 1', 'Content-Length: 2'], '{}')),
        ],
        ['no Content-Length', send(http('200 OK', ['X-Warren-Exit: 0'], '{}'))],
        ['Content-Length not digits', send(http('200 OK', ['X-Warren-Exit: 0', 'Content-Length: +2'], '{}'))],
        [
          'two Content-Length',
          send(http('200 OK', ['X-Warren-Exit: 0', 'Content-Length: 2', 'Content-Length: 2'], '{}')),
        ],
        [
          'Content-Length past 64 MiB',
          send(http('200 OK', ['X-Warren-Exit: 0', `Content-Length: ${64 * 1024 * 1024 + 1}`], '{}')),
        ],
        ['chunked', send(http('200 OK', ['X-Warren-Exit: 0', 'Transfer-Encoding: chunked'], '2\r\n{}\r\n0\r\n\r\n'))],
        ['a body cut short', send(http('200 OK', ['X-Warren-Exit: 0', 'Content-Length: 100'], '{}'))],
        ['a head cut short', send(Buffer.from('HTTP/1.1 200 OK\r\nX-Warren-Exit: 0\r\nContent-Len'))],
        [
          'a head past 64 KiB',
          send(http('200 OK', ['X-Warren-Exit: 0', `X-Pad: ${'p'.repeat(65 * 1024)}`, 'Content-Length: 2'], '{}')),
        ],
        [
          'a bare LF hiding X-Warren-Fallback',
          send(http('200 OK', ['X-Warren-Exit: 0', 'X-Other: x\nX-Warren-Fallback: 1', 'Content-Length: 2'], '{}')),
        ],
        [
          'a header line without a colon',
          send(http('200 OK', ['X-Warren-Exit: 0', 'Content-Length: 2', 'nonsense'], '{}')),
        ],
        ['garbage', send(Buffer.from('hello, this is not HTTP\r\n\r\n'))],
        ['HTTP/2', send(Buffer.from('HTTP/2 200\r\nX-Warren-Exit: 0\r\nContent-Length: 2\r\n\r\n{}'))],
        ['a connection closed without an answer', (connection) => void connection.end()],
        ['a connection destroyed', (connection) => void connection.destroy()],
      ];
      for (const [what, reply] of answers) {
        const agent = await fakeAgent(reply);
        const env = cniEnv(agent.socket);
        await fallsBack(env, config()).catch((error: unknown) => assert.fail(`${what}: ${String(error)}`));
        assert.equal(agent.received.length, 1, what);
      }
    });

    it('hands the call to the plugin when no agent listens or takes the call (no socket file, a file that is no socket, a stale socket, a connection closed at once)', async () => {
      const dir = tempDir('warren-fwd-noagent-');
      writeFileSync(join(dir, 'file.sock'), '');
      // A killed agent leaves its socket file behind with nobody listening: ECONNREFUSED.
      const stale = join(dir, 'stale.sock');
      const listener = track(
        spawn(
          process.execPath,
          ['-e', `require('node:net').createServer().listen(${JSON.stringify(stale)}, () => console.log('ready'))`],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        ),
      );
      await new Promise((resolve) => listener.stdout?.once('data', resolve));
      listener.kill('SIGKILL');
      await new Promise((resolve) => listener.once('exit', resolve));
      assert.ok(existsSync(stale));
      const closing = await fakeAgent('close at accept');
      for (const socket of [join(dir, 'missing.sock'), join(dir, 'file.sock'), stale, closing.socket]) {
        await fallsBack(cniEnv(socket), config());
      }
    });

    it('chooses the socket: ipam.socket, then WARREN_SOCKET, then /run/warren/warren.sock', async () => {
      const fromConfig = await fakeAgent(send(outcome(0, 'config')));
      const fromEnv = await fakeAgent(send(outcome(0, 'env')));
      const cases: Array<[string, string, NodeJS.ProcessEnv]> = [
        ['config', config(fromConfig.socket), {}],
        ['config', config(fromConfig.socket), { WARREN_SOCKET: '' }],
        ['env', config(), {}],
        ['env', config('relative/agent.sock'), {}],
        ['env', `{"ipam":{"socket":"/a"},"ipam":{"type":"warren"}}`, {}],
        [
          'config',
          `{"ipam":{"socket":"/a"},"ip\\u0061m":{"socket":"${fromConfig.socket.replaceAll('/', '\\/')}"}}`,
          {},
        ],
        [
          'env',
          `{"socket":${JSON.stringify(fromConfig.socket)},"plugins":[{"ipam":{"socket":${JSON.stringify(fromConfig.socket)}}}]}`,
          {},
        ],
      ];
      for (const [expected, stdin, extra] of cases) {
        const run = await forward(cniEnv(fromEnv.socket, extra), stdin);
        assert.equal(run.stdout.toString(), expected, stdin);
      }
    });

    it('uses /run/warren/warren.sock when neither names a socket (in a private mount namespace)', async (t) => {
      const dir = tempDir('warren-fwd-default-');
      const agent = await fakeAgent(send(outcome(0, 'default')), join(dir, 'warren.sock'));
      const probe = spawnSync('unshare', ['--mount', '--propagation', 'private', 'true']);
      if (probe.status !== 0) {
        t.skip(`no private mount namespace here (unshare: ${probe.stderr?.toString().trim() ?? probe.error?.message})`);
        return;
      }
      const script = 'mount -t tmpfs tmpfs /run && mkdir /run/warren && mount --bind "$1" /run/warren && exec "$2"';
      for (const socket of [undefined, '']) {
        const env = cniEnv('');
        if (socket === undefined) delete env.WARREN_SOCKET;
        const run = await execute(
          'unshare',
          ['--mount', '--propagation', 'private', 'sh', '-c', script, 'sh', dir, build.binary],
          env,
          config(),
        );
        assert.equal(run.stderr, '');
        assert.equal(run.stdout.toString(), 'default');
      }
      assert.equal(agent.received.length, 2);
    });

    it('hands the plugin exactly the first 4 MiB + 1 bytes of a larger stdin, and relays exactly 4 MiB', async () => {
      const agent = await fakeAgent(send(outcome(0, 'relayed')));
      const env = cniEnv(agent.socket);
      const sized = (size: number): Buffer => {
        const frame = Buffer.from('{"pad":""}');
        const text = Buffer.alloc(size, 'a');
        frame.copy(text, 0, 0, 8);
        text.write('"}', size - 2);
        return text;
      };
      const exact = sized(MAX_CONFIG_BYTES);
      const run = await forward(env, exact);
      assert.equal(run.stdout.toString(), 'relayed');
      assert.ok((agent.received[0] as Received).body.equals(pluginBody(env, exact)));

      const over = sized(MAX_CONFIG_BYTES + 4096);
      const report = pluginReport(await forward(env, over));
      assert.ok(report.stdin.equals(over.subarray(0, MAX_CONFIG_BYTES + 1)), `plugin got ${report.stdin.length} bytes`);
      assert.deepEqual(report.env, env);
      assert.equal(agent.received.length, 1);
    });

    it('hands the plugin a stdin that is empty or not a JSON object, a config nested too deep, an unusable ipam.socket', async () => {
      const agent = await fakeAgent(send(outcome(0, 'relayed')));
      const env = cniEnv(agent.socket);
      const stdins = [
        '',
        ' \n',
        '[{"ipam":{}}]',
        '"text"',
        'not json',
        '\ufeff{}',
        `{"x":${'['.repeat(MAX_CONFIG_DEPTH)}${']'.repeat(MAX_CONFIG_DEPTH)}}`,
        `{"ipam":{"socket":"/run/a\\u0000b"}}`,
        `{"ipam":{"socket":"/run/\\ud800"}}`,
        `{"ipam":{"socket":"/${'a'.repeat(107)}"}}`,
      ];
      for (const stdin of stdins) await fallsBack(env, stdin);
      assert.equal(agent.received.length, 0);
      // At the depth limit it is still the agent's.
      const deepest = `{"x":${'['.repeat(MAX_CONFIG_DEPTH - 1)}${']'.repeat(MAX_CONFIG_DEPTH - 1)}}`;
      assert.equal((await forward(env, deepest)).stdout.toString(), 'relayed');
    });

    it('hands the plugin a too-long WARREN_SOCKET', async () => {
      await fallsBack(cniEnv(`/${'s'.repeat(107)}`), config());
    });

    it('without CNI_COMMAND runs the plugin at once with its arguments and stdin unread', async () => {
      const agent = await fakeAgent(send(outcome(0, 'relayed')));
      const env = cniEnv(agent.socket);
      delete env.CNI_COMMAND;
      const stdin = 'typed by a person\n';
      const report = pluginReport(await forward(env, stdin, ['version', '--json']));
      assert.deepEqual(report.args, ['version', '--json']);
      assert.equal(report.stdin.toString(), stdin);
      assert.deepEqual(report.env, env);
      assert.equal(agent.received.length, 0);
    });

    it('finds the plugin in warren.d beside its own executable', async () => {
      const dir = tempDir('warren-fwd-installed-');
      copyFileSync(build.binary, join(dir, 'warren'));
      spawnSync('chmod', ['755', join(dir, 'warren')]);
      mkdirSync(join(dir, 'warren.d'));
      symlinkSync(process.execPath, join(dir, 'warren.d', 'node'));
      writeFileSync(join(dir, 'warren.d', 'warren.cjs'), FAKE_PLUGIN);
      const env = cniEnv(join(dir, 'no-agent.sock'));
      delete env.WARREN_FORWARDER_FALLBACK_DIR;
      const run = await execute(join(dir, 'warren'), [], env, config());
      assert.equal(run.stderr, '');
      const report = pluginReport(run);
      assert.equal(report.script, join(dir, 'warren.d', 'warren.cjs'));
      assert.equal(report.stdin.toString(), config());
    });

    it('prints its one message of its own, code 11, when the plugin beside it cannot be run', async () => {
      const empty = tempDir('warren-fwd-empty-');
      const env = cniEnv(join(empty, 'no-agent.sock'), { WARREN_FORWARDER_FALLBACK_DIR: empty });
      const run = await forward(env, config());
      assert.equal(run.code, 1);
      assert.equal(
        run.stdout.toString(),
        '{"cniVersion":"1.1.0","code":11,"msg":"could not reach the agent, and the Warren plugin beside this forwarder could not be run: No such file or directory"}',
      );
    });

    it("exits 1 and leaks nothing when the agent's answer cannot be written to stdout", async () => {
      const agent = await fakeAgent(send(outcome(0, '{"cniVersion":"1.0.0"}')));
      // stdout open for reading only: every write fails (EBADF), with no SIGPIPE to end it first.
      const run = await execute(
        '/bin/sh',
        ['-c', 'exec "$0" 1</dev/null', build.binary],
        cniEnv(agent.socket),
        config(),
      );
      assert.equal(run.stderr, '', 'the forwarder (or a sanitizer) wrote to stderr');
      assert.equal(run.code, 1);
      assert.equal(agent.received.length, 1);
    });
  });
}
