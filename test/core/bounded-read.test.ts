/**
 * readRegularFile against real files others could make: a FIFO (never blocks: the test would hang
 * otherwise), a link to /dev/zero (never read without bound), a directory, a missing file, a file
 * past the bound, a symbolic link when links are refused; a regular file is read whole.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { readRegularFile, unreadReason } from '../../src/core/bounded-read.ts';
import { tempDir } from '../helpers/processes.ts';

describe('readRegularFile', () => {
  const dir = tempDir('warren-bounded-');
  it('reads a regular file whole, and says what anything else is without opening it for a blocking read', () => {
    writeFileSync(join(dir, 'plain'), 'hello');
    assert.deepEqual(readRegularFile(join(dir, 'plain'), 5), { kind: 'read', text: 'hello', uid: process.getuid?.() });
    execFileSync('mkfifo', [join(dir, 'fifo')]);
    assert.deepEqual(readRegularFile(join(dir, 'fifo'), 100), { kind: 'not-regular', what: 'a FIFO' });
    symlinkSync('/dev/zero', join(dir, 'zero'));
    assert.deepEqual(readRegularFile(join(dir, 'zero'), 100), { kind: 'not-regular', what: 'a character device' });
    mkdirSync(join(dir, 'sub'));
    assert.deepEqual(readRegularFile(join(dir, 'sub'), 100), { kind: 'not-regular', what: 'a directory' });
    assert.deepEqual(readRegularFile(join(dir, 'nothing'), 100), { kind: 'missing' });
    assert.deepEqual(readRegularFile(join(dir, 'plain'), 4), { kind: 'too-large', maxBytes: 4 });
    symlinkSync(join(dir, 'plain'), join(dir, 'link'));
    assert.deepEqual(readRegularFile(join(dir, 'link'), 100), { kind: 'read', text: 'hello', uid: process.getuid?.() });
    assert.deepEqual(readRegularFile(join(dir, 'link'), 100, { noFollow: true }), {
      kind: 'not-regular',
      what: 'a symbolic link',
    });
    assert.equal(unreadReason({ kind: 'not-regular', what: 'a FIFO' }), 'is a FIFO, not a regular file');
  });
});
