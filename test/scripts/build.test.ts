/**
 * The build's outputs in dist/ are replaced whole or not at all. Test files build the plugin
 * (test/helpers/cni.ts) while other test files run it and start agents from dist/, two files at a
 * time: a file rewritten in place was empty for a moment, and an agent started then exited on
 * "Invalid package config dist/package.json" (seen under load in the chaos test).
 */
import assert from 'node:assert/strict';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { PLUGIN_BUNDLE, REPO_ROOT, buildPlugin, writeWhole } from '../../scripts/build.ts';
import { tempDir } from '../helpers/processes.ts';

const identity = (path: string) => {
  const s = statSync(path, { bigint: true });
  return { ino: s.ino, mtimeNs: s.mtimeNs, mode: s.mode & 0o777n };
};

describe('the build of dist/', () => {
  it('rewrites nothing when the plugin is already built: a reader never meets a file being written', () => {
    buildPlugin();
    const files = [PLUGIN_BUNDLE, join(REPO_ROOT, 'dist', 'package.json')];
    const before = files.map(identity);
    buildPlugin();
    assert.deepEqual(files.map(identity), before);
  });

  it('replaces a changed file by a rename, never in place, with the mode asked for', () => {
    const path = join(tempDir('warren-build-'), 'out');
    writeFileSync(path, 'old contents\n', { mode: 0o600 });
    const old = identity(path);
    writeWhole(path, Buffer.from('new contents\n'), 0o755);
    assert.equal(readFileSync(path, 'utf8'), 'new contents\n');
    const now = identity(path);
    assert.notEqual(now.ino, old.ino, 'a new file renamed over the old one');
    assert.equal(now.mode, 0o755n);
    writeWhole(path, Buffer.from('new contents\n'), 0o755);
    assert.deepEqual(identity(path), now, 'the same bytes again: left alone');
  });
});
