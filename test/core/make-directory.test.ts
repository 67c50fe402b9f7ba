/**
 * The bounded directory walk (core/make-directory.ts): makes what is missing, accepts what is
 * there, and answers every path it cannot make with an error naming it — /proc included, where
 * Node's recursive mkdir never returns.
 */
import assert from 'node:assert/strict';
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isWarrenError } from '../../src/core/errors.ts';
import { makeDirectory } from '../../src/core/make-directory.ts';
import { tempDir } from '../helpers/processes.ts';

describe('makeDirectory', () => {
  it('makes every missing component with the mode given, and is a no-op when the directory is there', () => {
    const root = tempDir();
    const dir = join(root, 'a', 'b', 'c');
    makeDirectory(dir, 0o700);
    for (const d of [join(root, 'a'), join(root, 'a', 'b'), dir]) {
      assert.ok(statSync(d).isDirectory(), d);
      assert.equal(statSync(d).mode & 0o777, 0o700, d);
    }
    makeDirectory(dir, 0o755);
    assert.equal(statSync(dir).mode & 0o777, 0o700, 'an existing directory keeps its mode');
  });

  it('refuses a path through a file, naming the file', () => {
    const root = tempDir();
    const file = join(root, 'file');
    writeFileSync(file, '');
    assert.throws(
      () => makeDirectory(join(file, 'x', 'y')),
      (e: unknown) => isWarrenError(e, 'IO_FAILURE') && e.message.includes(`${file} exists and is not a directory`),
    );
    assert.throws(
      () => makeDirectory(file),
      (e: unknown) => isWarrenError(e, 'IO_FAILURE') && e.message.includes('is not a directory'),
    );
  });

  it('ends with an error naming the path under /proc instead of looping (Node recursive mkdir spins there)', () => {
    const path = `/proc/warren-no-such-${process.pid}/plugins`;
    assert.throws(
      () => makeDirectory(path),
      (e: unknown) =>
        isWarrenError(e, 'IO_FAILURE') &&
        e.message.includes(`cannot create directory ${path}`) &&
        e.message.includes('/proc exists but does not take the new directory'),
    );
  });
});
