/**
 * docs/error-codes.md lists every code Warren answers with (ALL_CNI_CODES and HTTP_STATUS of
 * src/api/errors.ts), each once with the CNI code and the HTTP status those tables give it, and
 * every CNI code in its CNI table: a code added to the tables fails here until it is documented.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ALL_CNI_CODES, HTTP_STATUS } from '../../src/api/errors.ts';
import { codeSpans, docPage, sorted, tableColumn } from './doc-tables.ts';

const page = docPage('error-codes.md');
const [cniPart = '', codesPart = ''] = page.split(/^## Warren's codes$/m);

describe('docs/error-codes.md', () => {
  it("lists every one of Warren's codes, each once, and no other", () => {
    const listed = tableColumn(codesPart, 0).flatMap(codeSpans);
    assert.deepEqual(sorted(listed), sorted(Object.keys(HTTP_STATUS)));
    assert.deepEqual(sorted(Object.keys(ALL_CNI_CODES)), sorted(Object.keys(HTTP_STATUS)));
  });

  it('gives each code the CNI code and HTTP status of the tables', () => {
    const [names, cni, http] = [0, 1, 2].map((c) => tableColumn(codesPart, c));
    for (const [i, cell] of (names ?? []).entries()) {
      const code = codeSpans(cell)[0] as keyof typeof HTTP_STATUS;
      assert.equal(Number(cni?.[i]), ALL_CNI_CODES[code], `${code}: CNI code`);
      assert.equal(Number(http?.[i]), HTTP_STATUS[code], `${code}: HTTP status`);
    }
  });

  it('explains every CNI code a code maps to, and STATUS 50', () => {
    const explained = tableColumn(cniPart, 0).map(Number);
    for (const cni of new Set(Object.values(ALL_CNI_CODES))) {
      assert.ok(explained.includes(cni), `CNI code ${cni} is not in the CNI table`);
    }
  });
});
