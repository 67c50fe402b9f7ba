/**
 * writeFileAtomic: the whole new content with the right mode, replacing what was there, and never
 * a temporary file left behind — whether the write succeeds or fails.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fsyncDirectory, writeFileAtomic } from '../../src/core/atomic-file.ts';
import { tempDir } from '../helpers/processes.ts';

function mode(path: string): number {
  return statSync(path).mode & 0o777;
}

describe('writeFileAtomic', () => {
  test('writes the content with mode 0600 by default', () => {
    const dir = tempDir();
    const path = join(dir, 'entry.release');
    writeFileAtomic(path, 'hello\n');
    assert.equal(readFileSync(path, 'utf8'), 'hello\n');
    assert.equal(mode(path), 0o600);
  });

  test('honours an explicit mode', () => {
    const dir = tempDir();
    const path = join(dir, 'shared');
    const old = process.umask(0);
    try {
      writeFileAtomic(path, 'x', 0o644);
    } finally {
      process.umask(old);
    }
    assert.equal(mode(path), 0o644);
  });

  test('writes bytes and empty content exactly', () => {
    const dir = tempDir();
    const bytes = new Uint8Array(200_000).map((_, i) => (i * 31) & 0xff);
    writeFileAtomic(join(dir, 'bytes'), bytes);
    assert.deepEqual(new Uint8Array(readFileSync(join(dir, 'bytes'))), bytes);
    writeFileAtomic(join(dir, 'empty'), '');
    assert.equal(readFileSync(join(dir, 'empty'), 'utf8'), '');
  });

  test('replaces an existing file', () => {
    const dir = tempDir();
    const path = join(dir, 'state');
    writeFileSync(path, 'old content that is longer than the new one');
    writeFileAtomic(path, 'new');
    assert.equal(readFileSync(path, 'utf8'), 'new');
    writeFileAtomic(path, 'newer');
    assert.equal(readFileSync(path, 'utf8'), 'newer');
  });

  test('leaves no temporary file behind on success', () => {
    const dir = tempDir();
    for (let i = 0; i < 5; i++) writeFileAtomic(join(dir, `f${i}`), `content ${i}`);
    writeFileAtomic(join(dir, 'f0'), 'again');
    assert.deepEqual(readdirSync(dir).sort(), ['f0', 'f1', 'f2', 'f3', 'f4']);
  });

  test('a failed rename leaves no temporary file and the old content intact', () => {
    const dir = tempDir();
    // The target is an existing, non-empty directory: rename(file, dir) fails with EISDIR.
    const target = join(dir, 'target');
    mkdirSync(target);
    writeFileSync(join(target, 'inside'), 'old content');
    assert.throws(
      () => writeFileAtomic(target, 'new content'),
      (error: NodeJS.ErrnoException) => {
        assert.ok(['EISDIR', 'ENOTEMPTY', 'EEXIST'].includes(error.code ?? ''), `unexpected ${error.code}`);
        return true;
      },
    );
    assert.deepEqual(readdirSync(dir), ['target']);
    assert.ok(statSync(target).isDirectory());
    assert.deepEqual(readdirSync(target), ['inside']);
    assert.equal(readFileSync(join(target, 'inside'), 'utf8'), 'old content');
  });

  test('a directory that does not exist is an error and creates nothing', () => {
    const dir = tempDir();
    assert.throws(() => writeFileAtomic(join(dir, 'missing', 'file'), 'x'), { code: 'ENOENT' });
    assert.deepEqual(readdirSync(dir), []);
  });
});

describe('fsyncDirectory', () => {
  test('syncs an existing directory and refuses a missing one', () => {
    const dir = tempDir();
    fsyncDirectory(dir);
    assert.throws(() => fsyncDirectory(join(dir, 'missing')), { code: 'ENOENT' });
  });
});
