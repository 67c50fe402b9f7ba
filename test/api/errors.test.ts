/**
 * The one table from Warren error codes to HTTP status, as a table: every code's status and
 * whether it counts as expected (not logged as the agent's failure), and the way back from an
 * answer to a WarrenError with the agent's code and message.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WarrenError, type WarrenErrorCode, isWarrenError } from '../../src/core/errors.ts';
import { HTTP_STATUS, errorAnswer, errorFromAnswer, httpStatusOf, isExpected } from '../../src/api/errors.ts';
import { CNI_CODES } from '../../src/cni/errors.ts';

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
    assert.deepEqual(Object.keys(HTTP_STATUS).sort(), Object.keys(CNI_CODES).sort());
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
});
