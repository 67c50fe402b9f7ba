/**
 * The forwarder's scanner for `ipam.socket` (src/plugin/forwarder/find-socket.c), driven through a
 * small C program built here with AddressSanitizer and UBSan: a table of configs with the answer
 * each must get, and, wherever the text is valid JSON in valid UTF-8, the same answer as the
 * TypeScript plugin's rule applied to JSON.parse's value (the last duplicate key wins, escapes in
 * keys and values decoded), over the table and over generated configs.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import fc from 'fast-check';
import { FORWARDER_SOURCE_DIR, buildSanitized } from '../../scripts/build.ts';
import { MAX_CONFIG_DEPTH, nestsDeeperThan } from '../../src/api/limits.ts';
import { REPO, tempDir } from '../helpers/processes.ts';

type Answer = 'not-found' | 'unusable' | 'too-deep' | { readonly found: string };

/** sockaddr_un.sun_path less its NUL. */
const SOCKET_PATH_MAX = 107;

let driver = '';
before(() => {
  driver = join(tempDir('warren-find-socket-'), 'find-socket-driver');
  buildSanitized(
    [join(REPO, 'test', 'plugin', 'find-socket-driver.c'), join(FORWARDER_SOURCE_DIR, 'find-socket.c')],
    driver,
  );
});

/** The scanner's answers for many texts, in one run of the driver. */
function scan(texts: readonly Buffer[]): Answer[] {
  const dir = tempDir('warren-find-socket-input-');
  const files = texts.map((text, i) => {
    const file = join(dir, `${i}.json`);
    writeFileSync(file, text);
    return file;
  });
  const lines = execFileSync(driver, files, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
    .trimEnd()
    .split('\n');
  assert.equal(lines.length, texts.length);
  return lines.map((line): Answer => {
    if (line.startsWith('found ')) return { found: Buffer.from(line.slice(6), 'hex').toString('utf8') };
    assert.ok(line === 'not-found' || line === 'unusable' || line === 'too-deep', line);
    return line;
  });
}

/**
 * What the TypeScript plugin asks for, from the value: its rule (`socketOf` in src/plugin/plugin.ts:
 * config.ipam.socket when a string starting with "/"), its depth limit, and what the forwarder
 * refuses to guess: a path with a NUL, a lone surrogate, or longer than sun_path. Undefined when
 * the text is not JSON in valid UTF-8: the plugin's answer then is an error, not a socket.
 */
function reference(text: Buffer): Answer | undefined {
  const decoded = text.toString('utf8');
  if (!Buffer.from(decoded, 'utf8').equals(text)) return undefined;
  let config: unknown;
  try {
    config = JSON.parse(decoded);
  } catch {
    return undefined;
  }
  if (nestsDeeperThan(decoded, MAX_CONFIG_DEPTH)) return 'too-deep';
  const ipam = typeof config === 'object' && config !== null ? (config as { ipam?: unknown }).ipam : undefined;
  const socket = typeof ipam === 'object' && ipam !== null ? (ipam as { socket?: unknown }).socket : undefined;
  if (typeof socket !== 'string' || !socket.startsWith('/')) return 'not-found';
  if (!socket.isWellFormed() || socket.includes('\0') || Buffer.byteLength(socket) > SOCKET_PATH_MAX) return 'unusable';
  return { found: socket };
}

const found = (path: string): Answer => ({ found: path });
const sock = (value: string): string => `{"name":"n","ipam":{"type":"warren","socket":${value}}}`;
const nest = (depth: number, open = '[', close = ']'): string => `${open.repeat(depth)}${close.repeat(depth)}`;

/** [what the case is, the config text, the answer]. Buffers hold bytes that are not UTF-8. */
const TABLE: ReadonlyArray<readonly [string, string | Buffer, Answer]> = [
  ['an absolute ipam.socket', sock('"/run/w.sock"'), found('/run/w.sock')],
  ['the root alone', sock('"/"'), found('/')],
  ['no ipam', '{"cniVersion":"1.0.0","name":"n","type":"bridge"}', 'not-found'],
  ['ipam without socket', '{"ipam":{"type":"warren","range":"10.9.0.0/24"}}', 'not-found'],
  ['a relative socket', sock('"run/w.sock"'), 'not-found'],
  ['an empty socket', sock('""'), 'not-found'],
  ['a socket that is a number', sock('42'), 'not-found'],
  ['a socket that is null', sock('null'), 'not-found'],
  ['a socket that is an object', sock('{"path":"/run/w.sock"}'), 'not-found'],
  ['a socket that is an array', sock('["/run/w.sock"]'), 'not-found'],
  ['socket at the top level', '{"socket":"/run/w.sock","ipam":{}}', 'not-found'],
  ['socket one level deeper in ipam', '{"ipam":{"x":{"socket":"/run/w.sock"}}}', 'not-found'],
  ['ipam inside a plugin list', '{"plugins":[{"ipam":{"socket":"/run/w.sock"}}]}', 'not-found'],
  ['ipam under another key', '{"x":{"ipam":{"socket":"/run/w.sock"}}}', 'not-found'],
  ['a top-level array', '[{"ipam":{"socket":"/run/w.sock"}}]', 'not-found'],
  ['a top-level string', '"/run/w.sock"', 'not-found'],
  ['ipam that is an array', '{"ipam":[{"socket":"/run/w.sock"}]}', 'not-found'],
  ['ipam that is a string', '{"ipam":"{\\"socket\\":\\"/run/w.sock\\"}"}', 'not-found'],
  ['the key text inside another string', '{"x":"\\"ipam\\":{\\"socket\\":\\"/no\\"}","ipam":{}}', 'not-found'],
  ['keys differing in case', '{"IPAM":{"socket":"/a"},"ipam":{"Socket":"/b"}}', 'not-found'],
  ['keys extending the names', '{"ipams":{"socket":"/a"},"ipam":{"socket2":"/b","sock":"/c"}}', 'not-found'],
  ['escaped slashes', sock('"\\/run\\/w.sock"'), found('/run/w.sock')],
  ['a \\u escape for the slash', sock('"\\u002frun/w.sock"'), found('/run/w.sock')],
  ['escaped key names', '{"ip\\u0061m":{"\\u0073ocket":"/run/w.sock"}}', found('/run/w.sock')],
  ['every simple escape', sock('"/a\\"b\\\\c\\bd\\fe\\nf\\rg\\th"'), found('/a"b\\c\bd\fe\nf\rg\th')],
  ['a two-byte \\u escape', sock('"/run/\\u00e9t\\u00E9.sock"'), found('/run/été.sock')],
  ['a three-byte \\u escape', sock('"/run/\\u2603.sock"'), found('/run/☃.sock')],
  ['a surrogate pair', sock('"/run/\\ud83d\\ude00.sock"'), found('/run/😀.sock')],
  ['raw UTF-8', sock('"/run/été/😀.sock"'), found('/run/été/😀.sock')],
  ['a lone high surrogate', sock('"/run/\\ud800.sock"'), 'unusable'],
  ['a lone high surrogate at the end', sock('"/run/\\ud800"'), 'unusable'],
  ['a lone low surrogate', sock('"/run/\\udc00.sock"'), 'unusable'],
  ['a value starting with a lone high surrogate', sock('"\\ud800/run/w.sock"'), 'not-found'],
  ['a value starting with a lone low surrogate', sock('"\\udc00/run/w.sock"'), 'not-found'],
  ['a high surrogate before another escape', sock('"/run/\\ud800\\u0041"'), 'unusable'],
  ['two high surrogates', sock('"/run/\\ud800\\ud800\\udc00"'), 'unusable'],
  ['a NUL escape', sock('"/run/a\\u0000b"'), 'unusable'],
  ['a 107-byte path', sock(`"/${'a'.repeat(106)}"`), found(`/${'a'.repeat(106)}`)],
  ['a 108-byte path', sock(`"/${'a'.repeat(107)}"`), 'unusable'],
  ['107 bytes from escapes', sock(`"/${'\\u00e9'.repeat(53)}"`), found(`/${'é'.repeat(53)}`)],
  ['108 bytes from escapes', sock(`"/${'a'}${'\\u00e9'.repeat(53)}"`), 'unusable'],
  ['a very long path', sock(`"/${'a'.repeat(100_000)}"`), 'unusable'],
  ['a long relative value', sock(`"${'a'.repeat(100_000)}"`), 'not-found'],
  ['raw bytes that are not UTF-8', Buffer.from('{"ipam":{"socket":"/run/\xff\xfe.sock"}}', 'latin1'), 'unusable'],
  ['an overlong encoding', Buffer.from('{"ipam":{"socket":"/run/\xc0\xaf"}}', 'latin1'), 'unusable'],
  ['a surrogate encoded in UTF-8', Buffer.from('{"ipam":{"socket":"/run/\xed\xa0\x80"}}', 'latin1'), 'unusable'],
  ['a truncated sequence at the end', Buffer.from('{"ipam":{"socket":"/run/\xe2\x98"}}', 'latin1'), 'unusable'],
  ['past U+10FFFF', Buffer.from('{"ipam":{"socket":"/run/\xf4\x90\x80\x80"}}', 'latin1'), 'unusable'],
  [
    'bytes that are not UTF-8 elsewhere',
    Buffer.from('{"x":"\xff","ipam":{"socket":"/run/w.sock"}}', 'latin1'),
    found('/run/w.sock'),
  ],
  ['the last socket wins', '{"ipam":{"socket":"/a","socket":"/b"}}', found('/b')],
  ['the last ipam wins', '{"ipam":{"socket":"/a"},"name":"n","ipam":{"socket":"/b"}}', found('/b')],
  ['a last ipam without socket', '{"ipam":{"socket":"/a"},"ipam":{"type":"warren"}}', 'not-found'],
  ['a last ipam that is not an object', '{"ipam":{"socket":"/a"},"ipam":7}', 'not-found'],
  ['a last socket that is relative', '{"ipam":{"socket":"/a","socket":"b"}}', 'not-found'],
  ['a last socket that is an object', '{"ipam":{"socket":"/a","socket":{"x":"/b"}}}', 'not-found'],
  ['a good socket after an unusable one', '{"ipam":{"socket":"/\\u0000","socket":"/b"}}', found('/b')],
  ['an unusable socket after a good one', '{"ipam":{"socket":"/b","socket":"/\\u0000"}}', 'unusable'],
  ['an unusable socket in an earlier ipam', '{"ipam":{"socket":"/\\u0000"},"ipam":{"socket":"/b"}}', found('/b')],
  ['white space everywhere', ' \t\r\n{ "ipam" :\n{\t"socket"\r:  "/w" } }\n ', found('/w')],
  [
    'every kind of value around it',
    '{"a":[-0,0.5,1e10,-2.5E-3,1E+2,true,false,null,{},[],""],"ipam":{"mtu":1500,"f":true,"socket":"/n.sock","z":[{}]}}',
    found('/n.sock'),
  ],
  ['a number beyond double', '{"big":1e400,"ipam":{"socket":"/w"}}', found('/w')],
  // Not JSON: the scanner names no socket, and the agent or the plugin reports the text.
  ['truncated', '{"ipam":{"socket":"/run/w.sock"}', 'not-found'],
  ['truncated in the string', '{"ipam":{"socket":"/run/w', 'not-found'],
  ['truncated in an escape', '{"ipam":{"socket":"/run/\\u00', 'not-found'],
  ['trailing garbage', `${sock('"/w"')} x`, 'not-found'],
  ['two values', `${sock('"/w"')}${sock('"/w"')}`, 'not-found'],
  ['a trailing comma in an object', '{"ipam":{"socket":"/w",}}', 'not-found'],
  ['a trailing comma in an array', '{"a":[1,],"ipam":{"socket":"/w"}}', 'not-found'],
  ['single quotes', "{'ipam':{'socket':'/w'}}", 'not-found'],
  ['an unquoted key', '{ipam:{"socket":"/w"}}', 'not-found'],
  ['a missing colon', '{"ipam" {"socket":"/w"}}', 'not-found'],
  ['a missing comma', '{"a":1 "ipam":{"socket":"/w"}}', 'not-found'],
  ['a leading zero', '{"a":01,"ipam":{"socket":"/w"}}', 'not-found'],
  ['a bare fraction point', '{"a":1.,"ipam":{"socket":"/w"}}', 'not-found'],
  ['no integer part', '{"a":.5,"ipam":{"socket":"/w"}}', 'not-found'],
  ['a plus sign', '{"a":+1,"ipam":{"socket":"/w"}}', 'not-found'],
  ['a lone minus', '{"a":-,"ipam":{"socket":"/w"}}', 'not-found'],
  ['an empty exponent', '{"a":1e,"ipam":{"socket":"/w"}}', 'not-found'],
  ['NaN', '{"a":NaN,"ipam":{"socket":"/w"}}', 'not-found'],
  ['a truncated literal', '{"a":tru,"ipam":{"socket":"/w"}}', 'not-found'],
  ['a longer literal', '{"a":truex,"ipam":{"socket":"/w"}}', 'not-found'],
  ['a raw control character', '{"ipam":{"socket":"/w\n"}}', 'not-found'],
  ['a raw tab in a key', '{"ip\tam":1,"ipam":{"socket":"/w"}}', 'not-found'],
  ['an unknown escape', '{"ipam":{"socket":"/w\\x41"}}', 'not-found'],
  ['a short \\u escape', '{"ipam":{"socket":"/w\\u12"}}', 'not-found'],
  ['a \\u escape with a bad digit', '{"ipam":{"socket":"/w\\u12g4"}}', 'not-found'],
  ['a mismatched bracket', '{"a":[1},"ipam":{"socket":"/w"}}', 'not-found'],
  ['an extra close', '{"ipam":{"socket":"/w"}}}', 'not-found'],
  ['a NUL between tokens', '{"ipam":{"socket":"/w"}\0}', 'not-found'],
  ['a byte-order mark', '\ufeff{"ipam":{"socket":"/w"}}', 'not-found'],
  ['empty', '', 'not-found'],
  ['white space only', ' \n', 'not-found'],
  // Depth: the plugin refuses past MAX_CONFIG_DEPTH; the forwarder leaves that refusal to it.
  ['arrays 1000 deep', `{"ipam":{"socket":"/d"},"x":${nest(MAX_CONFIG_DEPTH - 1)}}`, found('/d')],
  ['arrays 1001 deep', `{"ipam":{"socket":"/d"},"x":${nest(MAX_CONFIG_DEPTH)}}`, 'too-deep'],
  ['a top-level array 1001 deep', nest(MAX_CONFIG_DEPTH + 1), 'too-deep'],
  [
    'objects 1001 deep',
    `{"x":${'{"a":'.repeat(MAX_CONFIG_DEPTH)}1${'}'.repeat(MAX_CONFIG_DEPTH)},"ipam":{"socket":"/d"}}`,
    'too-deep',
  ],
  ['100000 deep', nest(100_000), 'too-deep'],
  ['brackets inside strings', `{"x":"${'['.repeat(5000)}","ipam":{"socket":"/d"}}`, found('/d')],
  ['deep after a malformation', `{"a":01,"x":${nest(5000)}}`, 'not-found'],
];

describe("find-socket (the forwarder's scanner)", () => {
  it('answers every case of the table as expected', () => {
    const answers = scan(TABLE.map(([, text]) => Buffer.from(text)));
    TABLE.forEach(([what, , expected], i) => assert.deepEqual(answers[i], expected, what));
  });

  it("agrees with the TypeScript plugin's rule on every case that is JSON in UTF-8", () => {
    const texts = TABLE.map(([, text]) => Buffer.from(text));
    const answers = scan(texts);
    let compared = 0;
    TABLE.forEach(([what], i) => {
      const expected = reference(texts[i] as Buffer);
      if (expected === undefined) return;
      compared++;
      assert.deepEqual(answers[i], expected, what);
    });
    assert.ok(compared > 50, `only ${compared} cases compared`);
  });

  it("agrees with the TypeScript plugin's rule on generated configs with duplicate keys, escapes and white space", () => {
    const seed = Date.now();
    const texts = fc.sample(generatedConfig, { numRuns: 2000, seed }).map((text) => Buffer.from(text));
    const answers = scan(texts);
    const counts = new Map<string, number>();
    texts.forEach((text, i) => {
      const expected = reference(text);
      assert.notEqual(expected, undefined, `generated text is not JSON: ${text.toString()}`);
      assert.deepEqual(answers[i], expected, `seed ${seed}: ${text.toString()}`);
      const kind = typeof expected === 'string' ? expected : 'found';
      counts.set(kind, (counts.get(kind) ?? 0) + 1);
    });
    // The generator reaches every answer but depth, which the table covers.
    for (const kind of ['found', 'not-found', 'unusable'])
      assert.ok((counts.get(kind) ?? 0) > 30, `${kind}: ${JSON.stringify([...counts])}`);
  });
});

/** JSON text of `s` with escapes chosen by `how`: as JSON.stringify writes it, or more escaped. */
function encode(s: string, how: 'plain' | 'unicode' | 'slashes' | 'upper'): string {
  switch (how) {
    case 'plain':
      return JSON.stringify(s);
    case 'slashes':
      return JSON.stringify(s).replaceAll('/', '\\/');
    case 'unicode':
    case 'upper': {
      let out = '"';
      for (let i = 0; i < s.length; i++) {
        const hex = s.charCodeAt(i).toString(16).padStart(4, '0');
        out += `\\u${how === 'upper' ? hex.toUpperCase() : hex}`;
      }
      return `${out}"`;
    }
    default: {
      const never: never = how;
      return never;
    }
  }
}

const space = fc.constantFrom('', '', ' ', '\n', '\t ', '\r\n  ');
const escaping = fc.constantFrom('plain', 'plain', 'unicode', 'slashes', 'upper') as fc.Arbitrary<
  'plain' | 'unicode' | 'slashes' | 'upper'
>;
const socketText = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom('/run/warren/warren.sock', '/tmp/a.sock', '/run/\\"q\\".sock') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '/a\0b',
      '/\ud800x',
      '/x\udc00',
      '\ud800/x',
      '\udc00/',
      `/${'a'.repeat(107)}`,
      `/${'é'.repeat(60)}`,
    ),
  },
  fc.constantFrom(
    '/run/warren/warren.sock',
    '/',
    '',
    'relative.sock',
    '/a\0b',
    '/\ud800x',
    '/x\udc00',
    '/é/😀',
    `/${'a'.repeat(106)}`,
    `/${'a'.repeat(107)}`,
    `/${'é'.repeat(60)}`,
  ),
  fc.string({ maxLength: 10 }),
  fc.string({ unit: 'binary', maxLength: 10 }).map((s) => `/${s}`),
  fc.string({ unit: 'grapheme', maxLength: 60 }).map((s) => `/${s}`),
);
const key = (names: readonly string[]): fc.Arbitrary<string> =>
  fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...names) }, { weight: 1, arbitrary: fc.string({ maxLength: 6 }) });
const str = (text: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.tuple(text, escaping).map(([s, how]) => encode(s, how));
const leaf = fc.oneof(
  fc.constantFrom('null', 'true', 'false', '0', '-0', '1.5e3', '-12.25E-2', '12345678901234567890'),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  str(fc.oneof(socketText, fc.string({ maxLength: 8 }))),
);
const object = (entries: fc.Arbitrary<ReadonlyArray<readonly [string, string]>>): fc.Arbitrary<string> =>
  fc
    .tuple(entries, space, space)
    .map(([list, a, b]) => `{${a}${list.map(([k, v]) => `${k}${b}:${a}${v}`).join(`,${b}`)}${b}}`);
const { value } = fc.letrec<{ value: string; array: string; object: string }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('array'), tie('object')),
  array: fc
    .tuple(fc.array(tie('value'), { maxLength: 4 }), space)
    .map(([items, s]) => `[${s}${items.join(`,${s}`)}${s}]`),
  object: object(fc.array(fc.tuple(str(key(['ipam', 'socket', 'type'])), tie('value')), { maxLength: 4 })),
}));
const socketValue = fc.oneof({ weight: 4, arbitrary: str(socketText) }, { weight: 1, arbitrary: value });
const ipam = fc.oneof(
  {
    weight: 4,
    arbitrary: object(
      fc.array(fc.tuple(str(key(['socket', 'socket', 'type', 'range'])), socketValue), { maxLength: 4 }),
    ),
  },
  { weight: 1, arbitrary: value },
);
const topValue = fc.oneof({ weight: 3, arbitrary: ipam }, { weight: 1, arbitrary: value });
const generatedConfig = fc
  .tuple(
    object(
      fc.array(fc.tuple(str(key(['ipam', 'ipam', 'name', 'cniVersion', 'socket'])), topValue), {
        minLength: 1,
        maxLength: 5,
      }),
    ),
    space,
    space,
  )
  .map(([text, a, b]) => `${a}${text}${b}`);
