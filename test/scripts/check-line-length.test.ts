/**
 * The line-length check `npm run lint` runs over src/: it must find a line one character too long
 * in a comment or a string (which the formatter leaves alone), count characters rather than bytes,
 * and look into sub-folders.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { MAX_LINE_LENGTH, longLines } from '../../scripts/check-line-length.ts';
import { tempDir } from '../helpers/processes.ts';

describe('the line-length check', () => {
  it('finds a comment and a string one character over the limit, in a sub-folder, and names file and line', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'src', 'part'), { recursive: true });
    const comment = `// ${'c'.repeat(MAX_LINE_LENGTH - 2)}`;
    const string = `const s = '${'s'.repeat(MAX_LINE_LENGTH - 12)}';`;
    const atTheLimit = `// ${'c'.repeat(MAX_LINE_LENGTH - 3)}`;
    assert.equal(comment.length, MAX_LINE_LENGTH + 1);
    assert.equal(string.length, MAX_LINE_LENGTH + 1);
    assert.equal(atTheLimit.length, MAX_LINE_LENGTH);
    writeFileSync(join(dir, 'src', 'part', 'a.ts'), `const x = 1;\n${comment}\n${string}\n${atTheLimit}\n`);
    writeFileSync(join(dir, 'src', 'part', 'notes.md'), `${'m'.repeat(200)}\n`);
    assert.deepEqual(longLines(join(dir, 'src'), dir), [
      `src/part/a.ts:2: ${MAX_LINE_LENGTH + 1} characters`,
      `src/part/a.ts:3: ${MAX_LINE_LENGTH + 1} characters`,
    ]);
  });

  it('counts characters, not bytes: a line of 120 characters with multi-byte ones passes', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'b.ts'), `// ${'≤'.repeat(MAX_LINE_LENGTH - 3)}\n`);
    assert.deepEqual(longLines(dir), []);
  });
});
