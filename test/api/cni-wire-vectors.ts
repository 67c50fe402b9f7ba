/**
 * The CNI wire's test vectors (test/fixtures/cni-wire-vectors.txt), generated from its one
 * definition (src/api/cni-wire.ts): the bytes a forwarder sends for given CNI variables and config,
 * how it must read given answers, and the wire's limits. The TypeScript codecs are checked against
 * the definition in test/api/cni-wire.test.ts, which also fails when the file is not what this
 * generates; the C forwarder reads the file in test/plugin/cni-wire-c.test.ts.
 *
 * Regenerate after changing the wire: `node test/api/cni-wire-vectors.ts --write`.
 *
 * The file is lines of space-separated words, easy to read in C:
 *   limit NAME VALUE
 *   request NAME / set VARIABLE BYTES / config BYTES / sends BYTES or refused / end
 *   answer NAME / raw BYTES / prints EXIT BYTES or handed-back / end
 * BYTES is a list of segments, concatenated: `x:HEX` (possibly empty) or `r:COUNT:HEX` (HEX
 * repeated COUNT times). A variable not `set` is unset. Lines starting with `#` are comments (a
 * preview of each vector's body or answer, for a reader).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StdoutAnswer } from '../../src/api/cni-stdout.ts';
import {
  ENVELOPE,
  MAX_ANSWER_BODY_BYTES,
  MAX_ANSWER_HEAD_BYTES,
  MAX_EXIT_CODE,
  MAX_VARIABLE_BYTES,
  WIRE_LIMITS,
  forwardedAnswerBody,
  forwardedAnswerHeaders,
  forwardedRequest,
} from '../../src/api/cni-wire.ts';

export const VECTORS_FILE = join(
  fileURLToPath(new URL('.', import.meta.url)),
  '..',
  'fixtures',
  'cni-wire-vectors.txt',
);

type Variables = Readonly<Record<string, string | undefined>>;

export interface RequestVector {
  readonly name: string;
  readonly variables: Variables;
  readonly config: Buffer;
  /** What the forwarder sends; undefined: nothing, it hands the call to the plugin. */
  readonly sends: Buffer | undefined;
}

export interface AnswerVector {
  readonly name: string;
  readonly raw: Buffer;
  /** What the forwarder prints; undefined: it hands the call to the plugin. */
  readonly prints: { readonly exit: number; readonly body: Buffer } | undefined;
}

const ATTACHMENT: Variables = {
  CNI_COMMAND: 'ADD',
  CNI_CONTAINERID: 'c1',
  CNI_NETNS: '/var/run/netns/c1',
  CNI_IFNAME: 'eth0',
  CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p',
};
/** A config as a runtime writes it: indented, a final newline. */
const NETWORK = { cniVersion: '1.0.0', name: 'net', type: 'bridge', ipam: { type: 'warren', range: '10.9.0.0/24' } };
const CONFIG = `${JSON.stringify(NETWORK, null, 2)}\n`;

/** [name, variables, config]: what each request vector sends is the definition's. */
const REQUESTS: ReadonlyArray<readonly [string, Variables, string | Buffer]> = [
  ['add-every-variable', ATTACHMENT, CONFIG],
  [
    'del-without-netns-or-args',
    { ...ATTACHMENT, CNI_COMMAND: 'DEL', CNI_NETNS: undefined, CNI_ARGS: undefined },
    CONFIG,
  ],
  ['version-command-alone', { CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.1.0"}'],
  [
    'empty-variables-are-sent',
    { CNI_COMMAND: '', CNI_ARGS: '', CNI_CONTAINERID: '', CNI_NETNS: '', CNI_IFNAME: '' },
    CONFIG,
  ],
  ['an-unknown-command-is-sent-as-it-is', { ...ATTACHMENT, CNI_COMMAND: 'BOGUS' }, CONFIG],
  [
    'escapes-as-json-stringify',
    {
      ...ATTACHMENT,
      CNI_ARGS: 'K8S_POD_NAME="q\\uote"\n\ttab\x01\x1f\x7f\b\f\r é😀',
      CNI_IFNAME: '"',
      CNI_NETNS: '\\',
    },
    CONFIG,
  ],
  ['config-with-leading-white-space', ATTACHMENT, ` \n\t${CONFIG}`],
  ['config-that-is-not-json', ATTACHMENT, '{"cniVersion":'],
  ['config-bytes-that-are-not-utf-8', ATTACHMENT, Buffer.from('{"name":"\xff\xfe"}  ', 'latin1')],
  ['empty-config', ATTACHMENT, ''],
  ['a-variable-at-the-limit', { ...ATTACHMENT, CNI_ARGS: 'a'.repeat(MAX_VARIABLE_BYTES) }, CONFIG],
  ['a-variable-at-the-limit-escaped-six-fold', { ...ATTACHMENT, CNI_NETNS: '\x01'.repeat(MAX_VARIABLE_BYTES) }, CONFIG],
  ['a-variable-past-the-limit', { ...ATTACHMENT, CNI_ARGS: 'a'.repeat(MAX_VARIABLE_BYTES + 1) }, CONFIG],
  [
    'a-variable-past-the-limit-in-utf-8-bytes',
    { ...ATTACHMENT, CNI_CONTAINERID: 'é'.repeat(MAX_VARIABLE_BYTES / 2 + 1) },
    CONFIG,
  ],
  ['no-command', { ...ATTACHMENT, CNI_COMMAND: undefined }, CONFIG],
];

/** The agent's answers, as the definition writes them and Node frames them (the date fixed). */
const AGENT_ANSWERS: ReadonlyArray<readonly [string, StdoutAnswer]> = [
  [
    'agent-prints-a-result',
    { kind: 'print', stdout: '{"cniVersion":"1.0.0","ips":[{"address":"10.9.0.5/24"}]}', exitCode: 0 },
  ],
  ['agent-prints-nothing', { kind: 'print', stdout: '', exitCode: 0 }],
  [
    'agent-prints-an-error',
    { kind: 'print', stdout: '{"cniVersion":"1.0.0","code":7,"msg":"bad \\"x\\" é"}', exitCode: 1 },
  ],
  ['agent-hands-back-a-del', { kind: 'plugin', reason: 'del-not-committed', why: 'store busy' }],
  ['agent-hands-back-a-config', { kind: 'plugin', reason: 'config-not-json', why: 'not JSON' }],
];

function agentAnswer(answer: StdoutAnswer): Buffer {
  const headers = Object.entries(forwardedAnswerHeaders(answer))
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  // What Node adds to the agent's own headers, the date fixed.
  const node = 'Date: Thu, 01 Jan 1970 00:00:00 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=1\r\n';
  const head = `HTTP/1.1 200 OK\r\n${headers}${node}\r\n`;
  return Buffer.concat([Buffer.from(head), Buffer.from(forwardedAnswerBody(answer))]);
}

const ok = (exit: number, body: string, headers = ''): string =>
  `HTTP/1.1 200 OK\r\nx-warren-exit: ${exit}\r\n${headers}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const prints = (exit: number, body: string) => ({ exit, body: Buffer.from(body) });

/** [name, the answer's bytes, what the forwarder makes of it]: the definition's reading rule, case by case. */
const EDGE_ANSWERS: ReadonlyArray<readonly [string, string | Buffer, AnswerVector['prints']]> = [
  ['exit-code-at-the-limit', ok(MAX_EXIT_CODE, 'x'), prints(MAX_EXIT_CODE, 'x')],
  ['exit-code-past-the-limit', ok(MAX_EXIT_CODE + 1, 'x'), undefined],
  ['exit-code-not-digits', ok(1, 'x').replace(': 1', ': +1'), undefined],
  ['exit-code-padded', ok(1, 'x').replace(': 1', ':  1 \t'), prints(1, 'x')],
  ['header-names-in-any-case', 'HTTP/1.1 200 OK\r\nX-WARREN-EXIT: 2\r\nContent-LENGTH: 2\r\n\r\nab', prints(2, 'ab')],
  ['http-1-0-and-no-reason', 'HTTP/1.0 200\r\nx-warren-exit: 0\r\ncontent-length: 1\r\n\r\nz', prints(0, 'z')],
  ['other-headers-are-ignored', ok(0, 'b', 'x-other: 1\r\ncontent-type: text/plain\r\n'), prints(0, 'b')],
  ['bytes-past-the-body-are-not-the-answer', `${ok(0, 'abc')}trailing bytes`, prints(0, 'abc')],
  [
    'a-body-of-any-bytes',
    Buffer.concat([Buffer.from(ok(3, 'xxxx').slice(0, -4)), Buffer.from([0, 0xff, 0x0d, 0x0a])]),
    { exit: 3, body: Buffer.from([0, 0xff, 0x0d, 0x0a]) },
  ],
  ['status-not-200', ok(0, 'x').replace('200 OK', '404 Not Found'), undefined],
  ['status-2000', ok(0, 'x').replace('200 OK', '2000 OK'), undefined],
  ['fallback-header', ok(0, 'x', 'x-warren-fallback: no-command\r\n'), undefined],
  ['fallback-header-in-upper-case', ok(0, 'x', 'X-Warren-Fallback: config-too-deep\r\n'), undefined],
  ['no-exit-header', 'HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx', undefined],
  ['two-exit-headers', ok(0, 'x', 'x-warren-exit: 0\r\n'), undefined],
  ['no-content-length', 'HTTP/1.1 200 OK\r\nx-warren-exit: 0\r\n\r\nx', undefined],
  ['two-content-lengths', ok(0, 'x', 'content-length: 1\r\n'), undefined],
  [
    'content-length-past-the-limit',
    `HTTP/1.1 200 OK\r\nx-warren-exit: 0\r\ncontent-length: ${MAX_ANSWER_BODY_BYTES + 1}\r\n\r\n`,
    undefined,
  ],
  ['chunked', ok(0, 'x', 'transfer-encoding: chunked\r\n'), undefined],
  ['a-bare-lf-in-the-head', ok(0, 'x', 'x-other: 1\nx-warren-fallback: no-command\r\n'), undefined],
  ['a-folded-header-line', ok(0, 'x', 'x-other: 1\r\n x-more\r\n'), undefined],
  ['a-header-without-a-colon', ok(0, 'x', 'x-other\r\n'), undefined],
  ['a-body-cut-short', ok(0, 'abc').slice(0, -1), undefined],
  ['a-head-cut-short', 'HTTP/1.1 200 OK\r\ncontent-le', undefined],
  ['nothing-at-all', '', undefined],
  ['not-http', 'this is not HTTP at all\r\n\r\n', undefined],
  ['a-head-past-the-limit', ok(0, 'x', `x-pad: ${'p'.repeat(MAX_ANSWER_HEAD_BYTES)}\r\n`), undefined],
];

export function requestVectors(): RequestVector[] {
  return REQUESTS.map(([name, variables, config]) => {
    const bytes = Buffer.from(config);
    return { name, variables, config: bytes, sends: forwardedRequest(variables, bytes) };
  });
}

export function answerVectors(): AnswerVector[] {
  const fromAgent = AGENT_ANSWERS.map(
    ([name, answer]): AnswerVector => ({
      name,
      raw: agentAnswer(answer),
      prints: answer.kind === 'print' ? prints(answer.exitCode, answer.stdout) : undefined,
    }),
  );
  return [...fromAgent, ...EDGE_ANSWERS.map(([name, raw, out]) => ({ name, raw: Buffer.from(raw), prints: out }))];
}

/** `bytes` as segments: runs of a repeated unit (64 bytes or more) as `r:`, the rest as `x:`. */
export function segments(bytes: Buffer): string {
  const out: string[] = [];
  let literal = -1;
  let i = 0;
  const flush = (end: number): void => {
    if (literal >= 0) out.push(`x:${bytes.subarray(literal, end).toString('hex')}`);
    literal = -1;
  };
  while (i < bytes.length) {
    let best: { unit: number; count: number } | undefined;
    for (let unit = 1; unit <= 8 && i + unit <= bytes.length; unit++) {
      let count = 1;
      while (
        i + (count + 1) * unit <= bytes.length &&
        bytes.compare(bytes, i, i + unit, i + count * unit, i + (count + 1) * unit) === 0
      )
        count++;
      if (count * unit >= 64 && (best === undefined || count * unit > best.count * best.unit)) best = { unit, count };
    }
    if (best === undefined) {
      if (literal < 0) literal = i;
      i++;
      continue;
    }
    flush(i);
    out.push(`r:${best.count}:${bytes.subarray(i, i + best.unit).toString('hex')}`);
    i += best.count * best.unit;
  }
  flush(bytes.length);
  return out.length === 0 ? 'x:' : out.join(' ');
}

/** Bytes shown escaped (backslash, CR, LF, tab), by their codes. */
const SHOWN: Readonly<Record<number, string>> = { 92: '\\\\', 13: '\\r', 10: '\\n', 9: '\\t' };

/** A comment showing the start of `bytes` to a reader: at most 100, ASCII as it is, the rest as \xNN. */
function preview(what: string, bytes: Buffer): string {
  let text = '';
  for (const byte of bytes.subarray(0, 100)) {
    const shown = SHOWN[byte] ?? (byte >= 0x20 && byte < 0x7f ? String.fromCharCode(byte) : undefined);
    text += shown ?? `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return `# ${what}: ${text}${bytes.length > 100 ? ` ... (${bytes.length} bytes)` : ''}`;
}

/** The vector file's text, from the definition. */
export function vectorsText(): string {
  const lines = [
    "# The CNI wire's test vectors, generated from src/api/cni-wire.ts by test/api/cni-wire-vectors.ts",
    "# (node test/api/cni-wire-vectors.ts --write); do not edit. The format is in that file's header.",
    "# Variables in the envelope's order, with their fields:",
    ...ENVELOPE.map(({ field, variable, always }) => `#   ${variable} -> ${field}${always ? ' (always sent)' : ''}`),
  ];
  for (const [name, value] of Object.entries(WIRE_LIMITS)) lines.push(`limit ${name} ${value}`);
  for (const v of requestVectors()) {
    lines.push(`request ${v.name}`);
    if (v.sends !== undefined) lines.push(preview('sends', v.sends.subarray(v.sends.indexOf('\r\n\r\n') + 4)));
    for (const { variable } of ENVELOPE) {
      const value = v.variables[variable];
      if (value !== undefined) lines.push(`set ${variable} ${segments(Buffer.from(value))}`);
    }
    lines.push(`config ${segments(v.config)}`, v.sends === undefined ? 'refused' : `sends ${segments(v.sends)}`, 'end');
  }
  for (const v of answerVectors()) {
    lines.push(
      `answer ${v.name}`,
      preview('raw', v.raw),
      `raw ${segments(v.raw)}`,
      v.prints === undefined ? 'handed-back' : `prints ${v.prints.exit} ${segments(v.prints.body)}`,
      'end',
    );
  }
  return `${lines.join('\n')}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] !== '--write') {
    process.stdout.write(vectorsText());
  } else {
    writeFileSync(VECTORS_FILE, vectorsText());
    console.log(`wrote ${VECTORS_FILE}`);
  }
}
