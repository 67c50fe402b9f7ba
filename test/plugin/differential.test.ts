/**
 * The installed forwarder against the TypeScript plugin alone, call by call: for every command and
 * every error path of the plugin's tests and fuzz corpus, both print byte-identical stdout with
 * the same exit code, and journal the same intents, against the same agent state. What differs
 * between two runs of a stateful call is designed out: a retried ADD is the same answer (ADD is
 * idempotent per attachment), and fresh attachments are compared with their addresses
 * normalised. A third run of each call through a forwarder whose fallback is missing says who
 * answered: the agent (the same bytes again) or the TypeScript plugin (the forwarder's own "could
 * not run the plugin" error), where the agent's stdout mode decides it (api/forwarded-call.ts).
 *
 * The same corpus then runs through the forwarder built with AddressSanitizer and UBSan, which
 * must print the same and report nothing.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { type Server, type Socket, createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH } from '../../src/api/limits.ts';
import { buildForwarderSanitized } from '../../scripts/build.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { cniBinDir } from '../helpers/cni.ts';
import { holdDatabase } from '../helpers/sqlite-holder.ts';
import { CHILD_PATH, tempDir, track } from '../helpers/processes.ts';

/** One call as a runtime makes it: CNI variables (undefined: unset) and the stdin bytes. */
interface Call {
  readonly vars: Readonly<Record<string, string | undefined>>;
  readonly stdin: string | Buffer;
}

interface Run {
  readonly code: number | null;
  readonly stdout: Buffer;
  readonly stderr: string;
  /** Journal intents written, by file name, recordedAt and the stamp's readings left out. */
  readonly journal: Readonly<Record<string, unknown>>;
}

/** Who answers a forwarded call: the agent itself, or (handed back) the TypeScript plugin. */
type AnsweredBy = 'agent' | 'plugin';

interface Case {
  readonly name: string;
  readonly call: () => Call;
  /** Where the agent's stdout mode decides it; left out where the forwarder's own checks do. */
  readonly by?: AnsweredBy;
  /** Checks of the answer itself (both runs are the same by then). */
  readonly expect?: (run: Run) => void;
}

const NO_AGENT = '/nonexistent/warren-differential.sock';

function exec(
  executable: string,
  args: readonly string[],
  call: Call,
  journal: string,
  extraEnv: Record<string, string> = {},
): Promise<Run> {
  const env: NodeJS.ProcessEnv = { PATH: CHILD_PATH, WARREN_JOURNAL_DIR: journal, CNI_PATH: cniBinDir(), ...extraEnv };
  for (const [name, value] of Object.entries(call.vars)) if (value !== undefined) env[name] = value;
  return new Promise((resolve, reject) => {
    const child = track(spawn(executable, args, { env, stdio: ['pipe', 'pipe', 'pipe'] }));
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (c: Buffer) => out.push(c));
    child.stderr?.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(call.stdin);
    child.on('close', (code) =>
      resolve({
        code,
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err).toString('utf8'),
        journal: takeJournal(journal),
      }),
    );
  });
}

/** The intents in `dir`, removed so the next run starts from none. */
function takeJournal(dir: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.release'))) {
    const { recordedAt, stamp, ...entry } = JSON.parse(readFileSync(join(dir, name), 'utf8')) as {
      recordedAt: number;
      stamp?: { boot: string; at: number };
    };
    assert.equal(typeof recordedAt, 'number');
    // When it was recorded differs from run to run; that it was stamped on the boot's monotonic clock does not.
    out[name] = { ...entry, stamped: typeof stamp?.boot === 'string' && typeof stamp.at === 'number' };
    rmSync(join(dir, name));
  }
  return out;
}

const summary = (r: Run): string =>
  `exit ${r.code}, stdout ${JSON.stringify(r.stdout.toString('utf8').slice(0, 300))}, stderr ${JSON.stringify(r.stderr.slice(0, 300))}`;

/** A stand-in on a unix socket that answers every connection with `answer` (undefined: hangs up). */
async function fakeAgent(answer: string | undefined): Promise<string> {
  const socket = join(tempDir('warren-fake-'), 'agent.sock');
  const server: Server = createServer((conn: Socket) => {
    let seen = Buffer.alloc(0);
    conn.on('error', () => undefined);
    conn.on('data', (chunk: Buffer) => {
      seen = Buffer.concat([seen, chunk]);
      const end = seen.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/content-length:\s*(\d+)/i.exec(seen.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      if (seen.length < end + 4 + length) return;
      if (answer === undefined) conn.destroy();
      else conn.end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  fakes.push(server);
  return socket;
}
const fakes: Server[] = [];

function http(
  status: number,
  body: string,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): string {
  const head = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `HTTP/1.1 ${status} X\r\n${head}content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

describe('forwarder and TypeScript plugin: the same stdout, exit code and journal', () => {
  let agent: AgentHandle;
  let busy: AgentHandle;
  let forwarder: string;
  let fallbackDir: string;
  let noFallback: string;
  let journal: string;
  const fakeSockets: Record<string, string> = {};

  before(async () => {
    const bin = cniBinDir();
    forwarder = join(bin, 'warren');
    fallbackDir = join(bin, 'warren.d');
    noFallback = tempDir('warren-nofallback-');
    journal = join(tempDir('warren-diff-'), 'journal');
    agent = await startAgent();
    busy = await startAgent({ args: ['--db-busy-timeout', '0.2'] });
    const answers: Record<string, string | undefined> = {
      garbage: 'this is not HTTP at all\r\n\r\n',
      'HTTP 413': http(
        413,
        JSON.stringify({ error: { code: 'TOO_LARGE', message: 'request body is larger than 6291456 bytes' } }),
      ),
      'HTTP 503': http(503, JSON.stringify({ error: { code: 'TRY_AGAIN', message: 'store busy' } })),
      'HTTP 500': http(500, JSON.stringify({ error: { code: 'INTERNAL', message: 'bug' } })),
      'HTTP 502 HTML': http(502, '<html>bad gateway</html>', { 'content-type': 'text/html' }),
      'HTTP 200 not JSON': http(200, '{"kind":'),
      'HTTP 200 not an outcome': http(200, JSON.stringify({ kind: 'bogus' })),
      'HTTP 200 a result without output': http(200, JSON.stringify({ kind: 'result' })),
      'an older agent (an outcome as JSON, no stdout mode)': http(
        200,
        JSON.stringify({ kind: 'result', output: { cniVersion: '1.0.0', ips: [{ address: '10.99.0.9/24' }] } }),
      ),
      'an older agent answering a CNI error': http(
        200,
        JSON.stringify({ kind: 'error', output: { cniVersion: '1.0.0', code: 11, msg: 'store busy' } }),
      ),
      'a hang-up': undefined,
      'half a head': 'HTTP/1.1 200 OK\r\ncontent-le',
    };
    for (const [what, answer] of Object.entries(answers)) fakeSockets[what] = await fakeAgent(answer);
  });
  after(async () => {
    for (const f of fakes) f.close();
    await agent.stop();
    await busy.stop();
  });

  const net = (extra: Record<string, unknown> = {}, ipam: Record<string, unknown> = {}, socket = agent.socket) => ({
    cniVersion: '1.1.0',
    name: 'diffnet',
    ipam: { type: 'warren', socket, range: '10.98.0.0/24', ...ipam },
    ...extra,
  });
  const json = (value: unknown): string => JSON.stringify(value);
  const vars = (command: string | undefined, id = 'diff-1', extra: Record<string, string | undefined> = {}) => ({
    CNI_COMMAND: command,
    CNI_CONTAINERID: id,
    CNI_NETNS: `/var/run/netns/${id}`,
    CNI_IFNAME: 'eth0',
    CNI_ARGS: `K8S_POD_NAMESPACE=diff;K8S_POD_NAME=${id}`,
    ...extra,
  });
  const deep = (top: Record<string, unknown>, depth: number, arrays = true): string =>
    `${json(top).slice(0, -1)},"x":${arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`}}`;
  /** A config of exactly `bytes` bytes (a padding key at the top level, which netconf allows). */
  const sized = (bytes: number): string => {
    const base = json(net());
    return `${base.slice(0, -1)},"pad":"${'x'.repeat(bytes - base.length - 9)}"}`;
  };
  const code = (n: number) => (r: Run) => assert.equal(JSON.parse(r.stdout.toString()).code, n, summary(r));
  const silent = (r: Run) => assert.deepEqual([r.code, r.stdout.length], [0, 0], summary(r));
  const journaled = (r: Run) => {
    silent(r);
    assert.equal(Object.keys(r.journal).length, 1, 'one intent journaled');
  };

  /** Every case: the call, and what must hold of both answers. */
  const cases = (): Case[] => {
    const id = 'diff-1';
    const add = (config: unknown, extra: Record<string, string | undefined> = {}, cid = 'diff-bad') => ({
      vars: vars('ADD', cid, extra),
      stdin: typeof config === 'string' ? config : json(config),
    });
    const list: Case[] = [
      // Every command, against a live agent.
      { name: 'ADD', call: () => add(net(), {}, id), by: 'agent', expect: (r) => assert.equal(r.code, 0, summary(r)) },
      {
        name: 'ADD retried (idempotent)',
        call: () => add(net(), {}, id),
        by: 'agent',
        expect: (r) => assert.equal(r.code, 0),
      },
      {
        name: 'ADD in version 0.3.1',
        call: () => add(net({ cniVersion: '0.3.1' }), {}, 'diff-old'),
        by: 'agent',
        expect: (r) => assert.equal(r.code, 0),
      },
      {
        name: 'ADD dual stack with routes and dns',
        call: () =>
          add(
            net(
              {},
              {
                range: undefined,
                ipRanges: [{ range: '10.98.1.0/24' }, { range: 'fd00:98::/64' }],
                routes: [{ dst: '0.0.0.0/0' }],
                dns: { nameservers: ['10.0.0.10'] },
              },
            ),
            {},
            'diff-dual',
          ),
        by: 'agent',
        expect: (r) => assert.equal(r.code, 0, summary(r)),
      },
      {
        name: 'CHECK of what is held',
        call: () => ({ vars: vars('CHECK', id), stdin: json(net()) }),
        by: 'agent',
        expect: silent,
      },
      {
        name: 'CHECK of an attachment holding nothing (102)',
        call: () => ({ vars: vars('CHECK', 'diff-nobody'), stdin: json(net()) }),
        by: 'agent',
        expect: code(102),
      },
      {
        name: 'GC',
        call: () => ({
          vars: { CNI_COMMAND: 'GC' },
          stdin: json(net({ 'cni.dev/valid-attachments': [{ containerID: id, ifname: 'eth0' }] })),
        }),
        by: 'agent',
        expect: silent,
      },
      {
        name: 'STATUS',
        call: () => ({ vars: { CNI_COMMAND: 'STATUS' }, stdin: json(net()) }),
        by: 'agent',
        expect: silent,
      },
      {
        name: 'VERSION',
        call: () => ({ vars: { CNI_COMMAND: 'VERSION' }, stdin: json(net()) }),
        by: 'agent',
        expect: (r) => assert.ok(JSON.parse(r.stdout.toString()).supportedVersions.includes('1.1.0')),
      },
      {
        name: 'VERSION with an empty stdin',
        call: () => ({ vars: { CNI_COMMAND: 'VERSION' }, stdin: '' }),
        expect: (r) => assert.equal(r.code, 0),
      },
      {
        name: 'VERSION with garbage on stdin',
        call: () => ({ vars: { CNI_COMMAND: 'VERSION' }, stdin: '{garbage' }),
        by: 'agent',
        expect: (r) => assert.equal(r.code, 0),
      },
      { name: 'DEL', call: () => ({ vars: vars('DEL', id), stdin: json(net()) }), by: 'agent', expect: silent },
      {
        name: 'DEL again (idempotent)',
        call: () => ({ vars: vars('DEL', id, { CNI_NETNS: '' }), stdin: json(net()) }),
        by: 'agent',
        expect: silent,
      },
      // Bad JSON and configs that are not objects.
      { name: 'malformed JSON', call: () => add('{"cniVersion": "1.0.0", '), expect: code(6) },
      {
        name: 'malformed JSON starting like an object',
        call: () => add('{"cniVersion": "1.0.0", "name": }'),
        by: 'plugin',
        expect: code(6),
      },
      { name: 'a JSON array', call: () => add('[1,2]'), expect: code(7) },
      { name: 'a JSON string', call: () => add('"warren"'), expect: code(7) },
      { name: 'null', call: () => add('null'), expect: code(7) },
      { name: 'an empty stdin', call: () => add(''), expect: code(6) },
      { name: 'white space only', call: () => add(' \n\t'), expect: code(6) },
      {
        name: 'text after the config',
        call: () => add(`${json(net())}, "command": "DEL"`),
        by: 'plugin',
        expect: code(6),
      },
      { name: 'a byte-order mark', call: () => add(`\uFEFF${json(net())}`), expect: code(6) },
      {
        name: 'invalid UTF-8 in a string',
        call: () => ({
          vars: vars('ADD', 'diff-bad'),
          stdin: Buffer.concat([Buffer.from(json(net()).slice(0, -1)), Buffer.from(',"note":"\xff\xfe"}', 'latin1')]),
        }),
        by: 'agent',
      },
      {
        name: 'white space around the config',
        call: () => add(`\n  ${json(net())}\n\n`, {}, 'diff-ws'),
        by: 'agent',
        expect: (r) => assert.equal(r.code, 0),
      },
      // Bad configs (the bad-input corpus).
      {
        name: 'an unsupported cniVersion',
        call: () => add(net({ cniVersion: '0.2.0' })),
        by: 'agent',
        expect: code(1),
      },
      {
        name: 'a cniVersion from the future',
        call: () => add(net({ cniVersion: '9.9.9' })),
        by: 'agent',
        expect: code(1),
      },
      { name: 'a network name of the wrong type', call: () => add(net({ name: 42 })), by: 'agent', expect: code(7) },
      { name: 'a network name with a space', call: () => add(net({ name: 'bad name' })), by: 'agent', expect: code(7) },
      { name: 'no ipam', call: () => add(net({ ipam: undefined })), expect: code(7) },
      { name: 'ipam of the wrong type', call: () => add(net({ ipam: 'warren' })), expect: code(7) },
      { name: 'range of the wrong type', call: () => add(net({}, { range: 24 })), by: 'agent', expect: code(7) },
      {
        name: 'an unknown ipam key',
        call: () => add(net({}, { rnage_start: '10.98.0.5' })),
        by: 'agent',
        expect: code(7),
      },
      {
        name: 'an unknown key in ipRanges',
        call: () => add(net({}, { range: undefined, ipRanges: [{ range: '10.98.0.0/24', gw: '10.98.0.1' }] })),
        by: 'agent',
        expect: code(7),
      },
      {
        name: 'overlapping ranges',
        call: () => add(net({}, { ipRanges: [{ range: '10.98.0.0/25' }] })),
        by: 'agent',
        expect: code(7),
      },
      {
        name: 'a network_name with "#"',
        call: () => add(net({}, { network_name: 'blue#1' })),
        by: 'agent',
        expect: code(7),
      },
      {
        name: 'range_start outside the range',
        call: () => add(net({}, { range_start: '10.99.0.5' })),
        by: 'agent',
        expect: code(7),
      },
      {
        name: 'an exclusion of the wrong family',
        call: () => add(net({}, { exclude: ['fd00::/64'] })),
        by: 'agent',
        expect: code(7),
      },
      { name: 'a negative cooldown', call: () => add(net({}, { cooldown_seconds: -1 })), by: 'agent', expect: code(7) },
      {
        name: 'a config naming the etcd store',
        call: () => add(net({}, { store: 'etcd' })),
        by: 'agent',
        expect: code(7),
      },
      {
        name: 'an error in the config version (0.3.1)',
        call: () => add(net({ cniVersion: '0.3.1' }, { range: '10.98.0.0/33' })),
        by: 'agent',
        expect: (r) => assert.equal(JSON.parse(r.stdout.toString()).cniVersion, '0.3.1'),
      },
      {
        name: 'CHECK with a version older than CHECK',
        call: () => ({ vars: vars('CHECK', 'diff-bad'), stdin: json(net({ cniVersion: '0.3.1' })) }),
        by: 'agent',
        expect: code(1),
      },
      {
        name: 'GC with a version older than GC',
        call: () => ({ vars: { CNI_COMMAND: 'GC' }, stdin: json(net({ cniVersion: '1.0.0' })) }),
        by: 'agent',
        expect: code(1),
      },
      {
        name: 'STATUS with a bad config',
        call: () => ({ vars: { CNI_COMMAND: 'STATUS' }, stdin: json(net({}, { range: 24 })) }),
        by: 'agent',
        expect: code(7),
      },
      {
        // A DEL needs only its network, container and interface (cni/del-target.ts): released by them.
        name: 'DEL with a bad config',
        call: () => ({ vars: vars('DEL', 'diff-bad'), stdin: json(net({}, { range: 24 })) }),
        by: 'agent',
        expect: silent,
      },
      {
        name: 'DEL with a bad config that names no network (7)',
        call: () => ({ vars: vars('DEL', 'diff-bad'), stdin: json(net({ name: 42 }, { range: 24 })) }),
        by: 'agent',
        expect: code(7),
      },
      {
        name: 'duplicate keys (the last ipam wins)',
        call: () =>
          add(
            `{"cniVersion":"1.1.0","name":"diffnet","ipam":{"type":"warren","socket":"${NO_AGENT}"},"ipam":${json(net().ipam)}}`,
            {},
            'diff-dup',
          ),
        expect: (r) => assert.equal(r.code, 0, summary(r)),
      },
      // Bad CNI variables: the plugin checks them before stdin, and answers in the spec's version.
      { name: 'no CNI_COMMAND', call: () => add(net(), { CNI_COMMAND: undefined }), by: 'plugin', expect: code(4) },
      { name: 'an empty CNI_COMMAND', call: () => add(net(), { CNI_COMMAND: '' }), by: 'plugin', expect: code(4) },
      {
        name: 'an unknown CNI_COMMAND',
        call: () => add(net({ cniVersion: '0.4.0' }), { CNI_COMMAND: 'SMASH' }),
        by: 'agent',
        expect: code(4),
      },
      { name: 'a lower-case command', call: () => add(net(), { CNI_COMMAND: 'add' }), by: 'agent', expect: code(4) },
      {
        name: 'no CNI_CONTAINERID',
        call: () => add(net(), { CNI_CONTAINERID: undefined }),
        by: 'agent',
        expect: code(4),
      },
      {
        name: 'a container ID with a path in it',
        call: () => add(net(), { CNI_CONTAINERID: '../../etc/passwd' }),
        by: 'agent',
        expect: code(4),
      },
      {
        name: 'a container ID of 256 characters',
        call: () => add(net(), { CNI_CONTAINERID: 'a'.repeat(256) }),
        by: 'agent',
        expect: code(4),
      },
      {
        name: 'a container ID with a control character',
        call: () => add(net(), { CNI_CONTAINERID: 'a\x1bb' }),
        by: 'agent',
        expect: code(4),
      },
      { name: 'no CNI_IFNAME', call: () => add(net(), { CNI_IFNAME: undefined }), by: 'agent', expect: code(4) },
      {
        name: 'an interface name of 16 bytes',
        call: () => add(net(), { CNI_IFNAME: 'x'.repeat(16) }),
        by: 'agent',
        expect: code(4),
      },
      {
        name: 'an interface name with a slash',
        call: () => add(net(), { CNI_IFNAME: 'a/b' }),
        by: 'agent',
        expect: code(4),
      },
      { name: 'no CNI_NETNS on ADD', call: () => add(net(), { CNI_NETNS: undefined }), by: 'agent', expect: code(4) },
      {
        name: 'an empty CNI_NETNS on CHECK',
        call: () => ({ vars: vars('CHECK', 'diff-bad', { CNI_NETNS: '' }), stdin: json(net()) }),
        by: 'agent',
        expect: code(4),
      },
      {
        name: 'an unknown CNI_ARGS key',
        call: () => add(net(), { CNI_ARGS: 'FOO=bar' }),
        by: 'agent',
        expect: code(4),
      },
      {
        name: 'CNI_ARGS that are not KEY=VALUE',
        call: () => add(net(), { CNI_ARGS: 'a=b=c' }),
        by: 'agent',
        expect: code(4),
      },
      {
        name: 'a requested IP that is not an address',
        call: () => add(net(), { CNI_ARGS: 'IgnoreUnknown=1;IP=10.98.0.300' }),
        by: 'agent',
        expect: code(4),
      },
      {
        name: 'a requested IP outside every range (101)',
        call: () => add(net(), { CNI_ARGS: 'IP=192.0.2.9' }),
        by: 'agent',
        expect: code(101),
      },
      {
        name: 'bad CNI variables with a config that is not JSON',
        call: () => add('{not json', { CNI_CONTAINERID: undefined }),
        by: 'agent',
        expect: code(4),
      },
      { name: 'bad CNI variables with an empty stdin', call: () => add('', { CNI_COMMAND: 'SMASH' }), expect: code(4) },
      // Nesting and size limits.
      {
        name: 'ADD with a config nested 100000 levels deep',
        call: () => add(deep(net(), 100_000)),
        by: 'plugin',
        expect: code(7),
      },
      {
        name: 'ADD with objects nested past the limit',
        call: () => add(deep(net(), MAX_CONFIG_DEPTH + 1, false)),
        by: 'plugin',
        expect: code(7),
      },
      {
        name: 'ADD with a config nested just within the limit',
        call: () => add(deep(net(), MAX_CONFIG_DEPTH - 1), {}, 'diff-deepok'),
        by: 'agent',
        expect: (r) => assert.equal(r.code, 0, summary(r)),
      },
      {
        name: 'DEL with a deep config (journaled)',
        call: () => ({ vars: vars('DEL', 'diff-deep'), stdin: deep(net(), 100_000) }),
        by: 'plugin',
        expect: journaled,
      },
      {
        name: 'DEL with a deep config and no usable name (7)',
        call: () => ({ vars: vars('DEL', 'diff-deep'), stdin: deep(net({ name: 'bad name' }), 100_000) }),
        by: 'plugin',
        expect: code(7),
      },
      {
        name: 'STATUS with a deep config',
        call: () => ({ vars: { CNI_COMMAND: 'STATUS' }, stdin: deep(net(), 5_000) }),
        by: 'plugin',
        expect: code(7),
      },
      // The agent would answer VERSION whatever the config; the forwarder hands a deep one back first.
      {
        name: 'VERSION with a deep config',
        call: () => ({ vars: { CNI_COMMAND: 'VERSION' }, stdin: deep(net(), 5_000) }),
        expect: (r) => assert.equal(r.code, 0),
      },
      {
        name: 'a config of exactly the size limit',
        call: () => add(sized(MAX_CONFIG_BYTES), {}, 'diff-big'),
        by: 'agent',
        expect: (r) => assert.equal(r.code, 0, summary(r)),
      },
      {
        name: 'a config one byte past the size limit',
        call: () => add(sized(MAX_CONFIG_BYTES + 1), {}, 'diff-big'),
        expect: code(6),
      },
      {
        name: 'DEL with a config past the size limit',
        call: () => ({ vars: vars('DEL', 'diff-big'), stdin: sized(MAX_CONFIG_BYTES + 1) }),
        expect: code(6),
      },
      // The agent down: no socket.
      { name: 'ADD with the agent down (11)', call: () => add(net({}, {}, NO_AGENT)), by: 'plugin', expect: code(11) },
      {
        name: 'ADD with the agent down and a bad config (7)',
        call: () => add(net({}, { range: 24 }, NO_AGENT)),
        by: 'plugin',
        expect: code(7),
      },
      {
        name: 'DEL with the agent down (journaled)',
        call: () => ({ vars: vars('DEL', 'diff-down'), stdin: json(net({}, {}, NO_AGENT)) }),
        by: 'plugin',
        expect: journaled,
      },
      {
        name: 'DEL with the agent down and a bad config (journaled by its network name)',
        call: () => ({ vars: vars('DEL', 'diff-down'), stdin: json(net({}, { range: 24 }, NO_AGENT)) }),
        by: 'plugin',
        expect: journaled,
      },
      {
        name: 'DEL with the agent down and a bad config that names no network (7)',
        call: () => ({ vars: vars('DEL', 'diff-down'), stdin: json(net({ name: 42 }, { range: 24 }, NO_AGENT)) }),
        by: 'plugin',
        expect: code(7),
      },
      {
        name: 'DEL with the agent down, named by WARREN_SOCKET',
        call: () => ({
          vars: { ...vars('DEL', 'diff-down-env'), WARREN_SOCKET: NO_AGENT },
          stdin: json(net({ ipam: { type: 'warren', range: '10.98.0.0/24' } })),
        }),
        by: 'plugin',
        expect: journaled,
      },
      {
        name: 'CHECK with the agent down (11)',
        call: () => ({ vars: vars('CHECK', 'diff-down'), stdin: json(net({}, {}, NO_AGENT)) }),
        by: 'plugin',
        expect: code(11),
      },
      {
        name: 'GC with the agent down (11)',
        call: () => ({ vars: { CNI_COMMAND: 'GC' }, stdin: json(net({}, {}, NO_AGENT)) }),
        by: 'plugin',
        expect: code(11),
      },
      {
        name: 'STATUS with the agent down (50)',
        call: () => ({ vars: { CNI_COMMAND: 'STATUS' }, stdin: json(net({}, {}, NO_AGENT)) }),
        by: 'plugin',
        expect: code(50),
      },
      {
        name: 'VERSION with the agent down',
        call: () => ({ vars: { CNI_COMMAND: 'VERSION' }, stdin: json(net({}, {}, NO_AGENT)) }),
        expect: (r) => assert.equal(r.code, 0),
      },
    ];
    // Something on the socket that is not an agent answering as expected.
    for (const what of Object.keys(fakeSockets)) {
      const socket = fakeSockets[what] as string;
      list.push(
        {
          name: `ADD against ${what}`,
          call: () => add(net({ cniVersion: '1.0.0' }, {}, socket), {}, 'diff-fake'),
          by: 'plugin',
        },
        {
          name: `DEL against ${what}`,
          call: () => ({ vars: vars('DEL', 'diff-fake'), stdin: json(net({ cniVersion: '1.0.0' }, {}, socket)) }),
          by: 'plugin',
        },
        {
          name: `STATUS against ${what}`,
          call: () => ({ vars: { CNI_COMMAND: 'STATUS' }, stdin: json(net({}, {}, socket)) }),
          by: 'plugin',
        },
      );
    }
    return list;
  };

  /** Runs `call` through the forwarder, then the plugin alone, then the forwarder without its fallback. */
  async function compare(c: Case, binary = forwarder, env: Record<string, string> = {}): Promise<Run> {
    const call = c.call();
    const viaForwarder = await exec(binary, [], call, journal, { WARREN_SOCKET: agent.socket, ...env });
    const alone = await exec(join(fallbackDir, 'node'), [join(fallbackDir, 'warren.cjs')], call, journal, {
      WARREN_SOCKET: agent.socket,
    });
    assert.ok(
      viaForwarder.stdout.equals(alone.stdout),
      `${c.name}: stdout\n forwarder: ${summary(viaForwarder)}\n plugin:    ${summary(alone)}`,
    );
    assert.equal(viaForwarder.code, alone.code, `${c.name}: exit code`);
    assert.deepEqual(viaForwarder.journal, alone.journal, `${c.name}: journal`);
    assert.equal(alone.stderr, '', `${c.name}: the plugin writes nothing to stderr`);
    if (c.by !== undefined) {
      const unaided = await exec(binary, [], call, journal, {
        WARREN_SOCKET: agent.socket,
        ...env,
        WARREN_FORWARDER_FALLBACK_DIR: noFallback,
      });
      if (c.by === 'agent') {
        assert.ok(
          unaided.stdout.equals(alone.stdout),
          `${c.name}: answered by the agent, not handed back: ${summary(unaided)}`,
        );
        assert.equal(unaided.code, alone.code);
      } else {
        assert.equal(unaided.code, 1, `${c.name}: handed back to the plugin: ${summary(unaided)}`);
        assert.match(JSON.parse(unaided.stdout.toString()).msg as string, /.+/, `${c.name}: the forwarder's own error`);
        assert.ok(!unaided.stdout.equals(alone.stdout), `${c.name}: handed back to the plugin`);
      }
    }
    c.expect?.(viaForwarder);
    return viaForwarder;
  }

  it('prints the same for every command and every error path of the corpus', async () => {
    const all = cases();
    assert.ok(all.length >= 100, `${all.length} cases`);
    for (const c of all) await compare(c);
  });

  it('answers fresh attachments alike, addresses aside, and each the same again when retried', async () => {
    const config = json(
      net(
        {},
        { range: undefined, ipRanges: [{ range: '10.98.2.0/24', gateway: '10.98.2.1' }, { range: 'fd00:982::/64' }] },
      ),
    );
    const run = (binary: string, args: string[], id: string) =>
      exec(binary, args, { vars: vars('ADD', id), stdin: config }, journal);
    const plugin = join(fallbackDir, 'node');
    const bundle = join(fallbackDir, 'warren.cjs');
    const mask = (r: Run) => r.stdout.toString().replace(/"address":"[^"]*"/g, '"address":"*"');
    for (let i = 0; i < 5; i++) {
      const viaForwarder = await run(forwarder, [], `fresh-f${i}`);
      const alone = await run(plugin, [bundle], `fresh-p${i}`);
      assert.equal(viaForwarder.code, 0, summary(viaForwarder));
      assert.equal(mask(viaForwarder), mask(alone));
      assert.notEqual(viaForwarder.stdout.toString(), alone.stdout.toString(), 'two attachments, two addresses');
      assert.ok(
        (await run(plugin, [bundle], `fresh-f${i}`)).stdout.equals(viaForwarder.stdout),
        'the plugin retrying the forwarder’s ADD',
      );
      assert.ok(
        (await run(forwarder, [], `fresh-p${i}`)).stdout.equals(alone.stdout),
        'the forwarder retrying the plugin’s ADD',
      );
    }
  });

  it('journals a DEL while another process holds the database, and prints nothing, both of them', async () => {
    const config = (extra: Record<string, unknown> = {}) =>
      json({
        cniVersion: '1.1.0',
        name: 'busynet',
        ipam: { type: 'warren', socket: busy.socket, range: '10.97.0.0/24' },
        ...extra,
      });
    const added = await exec(forwarder, [], { vars: vars('ADD', 'busy-1'), stdin: config() }, journal);
    assert.equal(added.code, 0, summary(added));
    const holder = await holdDatabase(join(busy.dir, 'warren.db'));
    try {
      const del = await compare({
        name: 'DEL while the store is failing',
        call: () => ({ vars: vars('DEL', 'busy-1'), stdin: config() }),
        by: 'plugin',
        expect: journaled,
      });
      const intent = Object.values(del.journal)[0] as { reason: string };
      assert.match(intent.reason, /locked by another process/);
      await compare({
        name: 'ADD while the store is failing (11)',
        call: () => ({ vars: vars('ADD', 'busy-2'), stdin: config() }),
        by: 'agent',
        expect: code(11),
      });
      await compare({
        name: 'STATUS while the store is failing',
        call: () => ({ vars: { CNI_COMMAND: 'STATUS' }, stdin: config() }),
        by: 'agent',
      });
    } finally {
      await holder.release();
    }
  });

  it('prints the same through the forwarder built with AddressSanitizer and UBSan, which reports nothing', async (t) => {
    let sanitized: string;
    try {
      sanitized = join(tempDir('warren-asan-'), 'warren');
      buildForwarderSanitized(sanitized);
    } catch (error) {
      t.skip(`no sanitizer toolchain: ${(error as Error).message}`);
      return;
    }
    // The sanitized build is dynamically linked and runs outside the install, so it is told where
    // the fallback is. Leaks are checked too (at exit, when it printed the agent's answer itself);
    // a leak checker that cannot run (no ptrace) says so on stderr and fails the test.
    const env = {
      WARREN_FORWARDER_FALLBACK_DIR: fallbackDir,
      ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=1',
      UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
    };
    for (const c of cases()) {
      const viaForwarder = await compare(c, sanitized, env);
      assert.doesNotMatch(viaForwarder.stderr, /Sanitizer|runtime error/, `${c.name}: sanitizer report`);
    }
  });
});
