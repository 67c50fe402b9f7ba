/**
 * The one table from Warren error codes to HTTP status, as a table: every code's status and
 * whether it counts as expected (not logged as the agent's failure), and the way back from an
 * answer to a WarrenError with the agent's code and message. Then every code's CNI code, and
 * where the codes live: each declared once, by a layer, and raised in src/ only where that layer
 * can be seen (the layer rule of test/architecture.test.ts, for codes).
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { describe, it } from 'node:test';
import { CORE_ERROR_CODES, WarrenError, isWarrenError } from '../../src/core/errors.ts';
import { ALLOCATOR_ERROR_CODES } from '../../src/allocator/errors.ts';
import { CNI_CODES, CNI_ERROR_CODES, cniErrorOf } from '../../src/cni/errors.ts';
import {
  ALL_CNI_CODES,
  API_CNI_CODES,
  API_ERROR_CODES,
  HTTP_STATUS,
  type WarrenErrorCode,
  errorAnswer,
  errorFromAnswer,
  httpStatusOf,
  isExpected,
  toCniError,
} from '../../src/api/errors.ts';
import { REPO } from '../helpers/processes.ts';

/** [code, status, expected]: the contract, written out. */
const TABLE: ReadonlyArray<readonly [WarrenErrorCode, number, boolean]> = [
  ['BAD_REQUEST', 400, true],
  ['INVALID_CONFIG', 400, true],
  ['DECODE_FAILURE', 400, true],
  ['BAD_ENV', 400, true],
  ['INCOMPATIBLE_VERSION', 400, true],
  ['UNSUPPORTED_FIELD', 400, true],
  ['NOT_FOUND', 404, true],
  ['UNKNOWN_CONTAINER', 404, true],
  ['ALLOCATION_MISSING', 404, true],
  ['METHOD_NOT_ALLOWED', 405, true],
  ['ALREADY_RUNNING', 409, true],
  ['ADDRESS_UNAVAILABLE', 409, true],
  ['POOL_EXHAUSTED', 409, true],
  ['ALLOCATION_MISMATCH', 409, true],
  ['IN_USE', 409, true],
  ['TOO_LARGE', 413, true],
  ['TRY_AGAIN', 503, true],
  ['NOT_READY', 503, true],
  ['IO_FAILURE', 500, false],
  ['AGENT_UNREACHABLE', 500, false],
  ['INTERNAL', 500, false],
];

describe('error codes on the wire', () => {
  it('the table covers every Warren error code, as the CNI table does', () => {
    assert.deepEqual(TABLE.map(([code]) => code).sort(), Object.keys(HTTP_STATUS).sort());
    assert.deepEqual(Object.keys(HTTP_STATUS).sort(), Object.keys(ALL_CNI_CODES).sort());
  });

  for (const [code, status, expected] of TABLE) {
    it(`${code} is HTTP ${status}${expected ? ', expected (not logged as a failure)' : ', a failure of the agent (logged)'}`, () => {
      const error = new WarrenError(code, `a ${code} happened`);
      assert.equal(httpStatusOf(error), status);
      assert.equal(isExpected(error), expected);
      assert.deepEqual(errorAnswer(error), { error: { code, message: `a ${code} happened` } });
      const back = errorFromAnswer(status, errorAnswer(error), 'agent');
      assert.ok(isWarrenError(back, code), `${back.code} ${back.message}`);
      assert.equal(back.message, `a ${code} happened`);
    });
  }

  it('anything not a WarrenError is 500 INTERNAL, with its message, and unexpected', () => {
    const bug = new TypeError('x is undefined');
    assert.equal(httpStatusOf(bug), 500);
    assert.equal(isExpected(bug), false);
    assert.deepEqual(errorAnswer(bug), { error: { code: 'INTERNAL', message: 'x is undefined' } });
    assert.deepEqual(errorAnswer('thrown string'), { error: { code: 'INTERNAL', message: 'thrown string' } });
  });

  it('an answer that is not an error answer is IO_FAILURE naming the status', () => {
    for (const body of [undefined, null, 'text', [], { error: 'flat' }, { error: { code: 'BAD_REQUEST' } }]) {
      const error = errorFromAnswer(502, body, 'Warren agent at /s');
      assert.ok(isWarrenError(error, 'IO_FAILURE'), JSON.stringify(body));
      assert.equal(error.message, 'Warren agent at /s answered HTTP 502 without an error');
    }
  });

  it('a code this client does not know is kept in the message, as INTERNAL', () => {
    const error = errorFromAnswer(500, { error: { code: 'FROM_THE_FUTURE', message: 'new trouble' } }, 'agent');
    assert.ok(isWarrenError(error, 'INTERNAL'));
    assert.equal(error.message, 'FROM_THE_FUTURE: new trouble');
    // Not a prototype key taken for a code.
    assert.ok(isWarrenError(errorFromAnswer(500, { error: { code: 'toString', message: 'm' } }, 'agent'), 'INTERNAL'));
  });

  it("keeps the answer's HTTP status beside the code, so no caller reads it out of the message", () => {
    const answer = (code: string, message: string) => ({ error: { code, message } });
    assert.equal(errorFromAnswer(404, answer('NOT_FOUND', 'no route GET /v1/x'), 'agent').httpStatus, 404);
    assert.equal(errorFromAnswer(404, 'not found', 'agent').httpStatus, 404);
    assert.equal(errorFromAnswer(500, answer('INTERNAL', 'pool 10.0.4.0/24: 404 left'), 'agent').httpStatus, 500);
  });
});

/** Every code's CNI code: the spec's where one fits, Warren's own (100+) for its pool outcomes. */
const CNI: Readonly<Record<WarrenErrorCode, number>> = {
  INCOMPATIBLE_VERSION: 1,
  UNSUPPORTED_FIELD: 2,
  UNKNOWN_CONTAINER: 3,
  BAD_ENV: 4,
  IO_FAILURE: 5,
  DECODE_FAILURE: 6,
  INVALID_CONFIG: 7,
  TRY_AGAIN: 11,
  AGENT_UNREACHABLE: 11,
  NOT_READY: 50,
  POOL_EXHAUSTED: 100,
  ADDRESS_UNAVAILABLE: 101,
  ALLOCATION_MISSING: 102,
  ALLOCATION_MISMATCH: 103,
  BAD_REQUEST: 7,
  TOO_LARGE: 6,
  NOT_FOUND: 5,
  METHOD_NOT_ALLOWED: 5,
  ALREADY_RUNNING: 5,
  IN_USE: 7,
  INTERNAL: 5,
};

describe('error codes in a CNI answer', () => {
  for (const [code, cni] of Object.entries(CNI) as [WarrenErrorCode, number][]) {
    it(`${code} is CNI code ${cni}, with its message`, () => {
      assert.deepEqual(toCniError(new WarrenError(code, `a ${code} happened`), '1.1.0'), {
        cniVersion: '1.1.0',
        code: cni,
        msg: `a ${code} happened`,
      });
    });
  }

  it("the CNI table of the codes up to cni, and the API's own, together make the table of every code", () => {
    assert.deepEqual({ ...CNI_CODES, ...API_CNI_CODES }, CNI);
    assert.deepEqual(ALL_CNI_CODES, CNI);
    for (const code of Object.keys(API_CNI_CODES)) assert.ok(!Object.hasOwn(CNI_CODES, code), `${code} in both tables`);
  });

  it('anything not a WarrenError is 5, "internal error", and a code no table has is 5 with its message', () => {
    assert.deepEqual(toCniError(new TypeError('x is undefined'), '1.0.0'), {
      cniVersion: '1.0.0',
      code: 5,
      msg: 'internal error: x is undefined',
    });
    // cni's table alone does not know the API's codes: only api/errors.ts's toCniError is complete.
    assert.equal(cniErrorOf(new WarrenError('AGENT_UNREACHABLE', 'm'), CNI_CODES, '1.1.0').code, 5);
    assert.equal(toCniError(new WarrenError('toString', 'm')).code, 5);
  });

  it('details are the cause, unless the message already names its errno', () => {
    const cause = Object.assign(new Error('connect ENOENT /s'), { code: 'ENOENT' });
    assert.equal(
      toCniError(new WarrenError('AGENT_UNREACHABLE', 'not reachable (ENOENT)', { cause })).details,
      undefined,
    );
    assert.equal(toCniError(new WarrenError('IO_FAILURE', 'disk', { cause: new Error('EIO') })).details, 'EIO');
    assert.equal(toCniError(new WarrenError('IO_FAILURE', 'disk', { details: 'said so' })).details, 'said so');
  });
});

/** The layers that declare codes, in docs/layout.md's order (test/architecture.test.ts checks imports in it). */
const DECLARED: ReadonlyArray<readonly [layer: string, codes: readonly string[]]> = [
  ['core', CORE_ERROR_CODES],
  ['allocator', ALLOCATOR_ERROR_CODES],
  ['cni', CNI_ERROR_CODES],
  ['api', API_ERROR_CODES],
];
const LAYERS = ['core', 'ipam', 'store', 'allocator', 'cni', 'api', 'sources', 'agent'];
/** What each folder of src/ may see: its layer and those before it; the entry points theirs. */
function sees(unit: string): readonly string[] {
  if (unit === 'plugin') return ['core', 'ipam', 'cni', 'api'];
  if (unit === 'cli/adapters') return ['core', 'api'];
  if (unit === 'cli') return LAYERS;
  const index = LAYERS.indexOf(unit);
  assert.ok(index >= 0, `src/${unit} is not a layer`);
  return LAYERS.slice(0, index + 1);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/**
 * The code literals a file raises (`new WarrenError('X'`, or its subclass `new AnsweredError('X'`,
 * either arm of a conditional first argument) or matches (`isWarrenError(e, 'X')`). A literal
 * compared against (`=== 'STATUS'`) is not a code.
 */
export function codesIn(text: string): string[] {
  const found: string[] = [];
  for (const [, first] of text.matchAll(/new (?:WarrenError|AnsweredError)\(\s*([^,]*),/g)) {
    for (const [, code] of (first as string).matchAll(/(?<![!=]==\s*)'([A-Z][A-Z0-9_]*)'/g)) found.push(code as string);
  }
  for (const [, code] of text.matchAll(/isWarrenError\([^,()]+,\s*'([A-Z][A-Z0-9_]*)'\)/g)) found.push(code as string);
  return found;
}

describe('where error codes live', () => {
  const declaredIn = new Map<string, string>();
  for (const [layer, codes] of DECLARED)
    for (const code of codes)
      declaredIn.set(code, declaredIn.has(code) ? `${declaredIn.get(code)} and ${layer}` : layer);

  it('each code is declared by one layer, and the tables cover exactly the declared codes', () => {
    assert.deepEqual(
      [...declaredIn].filter(([, layer]) => layer.includes(' and ')),
      [],
    );
    assert.deepEqual([...declaredIn.keys()].sort(), Object.keys(HTTP_STATUS).sort());
    assert.deepEqual(
      [...CORE_ERROR_CODES, ...ALLOCATOR_ERROR_CODES, ...CNI_ERROR_CODES].sort(),
      Object.keys(CNI_CODES).sort(),
    );
    assert.deepEqual([...API_ERROR_CODES].sort(), Object.keys(API_CNI_CODES).sort());
  });

  it('codesIn finds raised and matched codes, not compared strings', () => {
    const text = `new WarrenError(env.command === 'STATUS' ? 'NOT_READY' : 'AGENT_UNREACHABLE', m);
      new WarrenError(
        'IO_FAILURE', m); new WarrenError(code, m); isWarrenError(error, 'TRY_AGAIN'); x.code === 'EADDRINUSE'`;
    assert.deepEqual(codesIn(text).sort(), ['AGENT_UNREACHABLE', 'IO_FAILURE', 'NOT_READY', 'TRY_AGAIN']);
  });

  it("every code raised or matched in src/ is declared by the file's layer or one it may import", () => {
    const SRC = join(REPO, 'src');
    const problems: string[] = [];
    const seen = new Set<string>();
    for (const path of sourceFiles(SRC)) {
      const parts = relative(SRC, path).split(sep);
      if (parts.length < 2) continue; // no file lives directly in src/ (test/architecture.test.ts)
      // Runtime adapters are CLI code held to the plugin wire, as test/architecture.test.ts holds them.
      const unit = parts[0] === 'cli' && parts[1] === 'adapters' ? 'cli/adapters' : (parts[0] as string);
      for (const code of codesIn(readFileSync(path, 'utf8'))) {
        seen.add(code);
        const layer = declaredIn.get(code);
        if (layer === undefined) problems.push(`${relative(REPO, path)}: ${code} is declared by no layer`);
        else if (!sees(unit).includes(layer))
          problems.push(`${relative(REPO, path)}: ${code} is declared by ${layer}, which src/${unit} may not see`);
      }
    }
    assert.deepEqual(problems, []);
    assert.ok(seen.size >= 15, `only ${seen.size} codes found: is codesIn still reading the source?`);
  });
});
