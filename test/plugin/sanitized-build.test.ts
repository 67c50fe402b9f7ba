/**
 * The leak check of every sanitized build (scripts/build.ts buildSanitized, which the forwarder's
 * tests and the C drivers use), held to what the suite relies on: a block not freed by exit is
 * reported wherever its pointer lingers (a slot of a live frame, a register), so a leak on one of the
 * forwarder's paths fails its test on every machine (test/plugin/leak-check-defaults.c says why
 * the default check did not: the forwarder's request buffer, leaked when neither the agent nor the
 * plugin could answer, was reported on one machine and not on another). A block a global holds
 * is not a leak, and a program that frees what it took prints nothing.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { buildSanitized } from '../../scripts/build.ts';
import { REPO, tempDir } from '../helpers/processes.ts';

/** The driver's block (test/plugin/leak-driver.c LEAK_BYTES). */
const LEAK_BYTES = 4242;

let driver = '';
before(() => {
  driver = join(tempDir('warren-leak-check-'), 'leak-driver');
  buildSanitized([join(REPO, 'test', 'plugin', 'leak-driver.c')], driver);
});

/** Runs the driver in `mode` with no sanitizer variables of the caller's: the build's own defaults. */
function run(mode: 'lingering' | 'global' | 'freed'): { status: number | null; stderr: string } {
  const env = { ...process.env };
  for (const name of ['ASAN_OPTIONS', 'LSAN_OPTIONS', 'UBSAN_OPTIONS']) delete env[name];
  const result = spawnSync(driver, [mode], { encoding: 'utf8', env, timeout: 120_000 });
  return { status: result.status, stderr: result.stderr };
}

describe('the sanitized builds’ leak check', () => {
  it('reports a block not freed by exit whose pointer still lingers in a live stack frame', () => {
    const result = run('lingering');
    assert.match(result.stderr, /ERROR: LeakSanitizer: detected memory leaks/);
    assert.match(result.stderr, new RegExp(`Direct leak of ${LEAK_BYTES} byte\\(s\\) in 1 object\\(s\\)`));
    assert.notEqual(result.status, 0, 'a leak fails the process');
  });

  it('does not report a block a global still holds', () => {
    assert.deepEqual(run('global'), { status: 0, stderr: '' });
  });

  it('reports nothing for a program that frees what it took', () => {
    assert.deepEqual(run('freed'), { status: 0, stderr: '' });
  });
});
