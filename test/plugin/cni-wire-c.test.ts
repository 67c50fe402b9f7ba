/**
 * The forwarder's side of the CNI wire (src/plugin/forwarder/agent-exchange.c) against the vector
 * file generated from the wire's one definition (test/fixtures/cni-wire-vectors.txt; the file is
 * held to src/api/cni-wire.ts by test/api/cni-wire.test.ts). A small C driver built here with
 * AddressSanitizer and UBSan reads the file and checks the C encoder's bytes for every request
 * vector, how the C reader takes every answer vector, and the compiled-in limits; a copy of the
 * file with planted differences shows that each kind of difference is reported.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { FORWARDER_SOURCE_DIR, buildSanitized } from '../../scripts/build.ts';
import { VECTORS_FILE } from '../api/cni-wire-vectors.ts';
import { REPO, tempDir } from '../helpers/processes.ts';

let driver = '';
let dir = '';
before(() => {
  dir = tempDir('warren-cni-wire-');
  driver = join(dir, 'cni-wire-driver');
  buildSanitized(
    [join(REPO, 'test', 'plugin', 'cni-wire-driver.c'), join(FORWARDER_SOURCE_DIR, 'agent-exchange.c')],
    driver,
  );
});

/** The driver over `file`: its exit status and what it printed. */
function drive(file: string): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(driver, [file, join(dir, 'peer.sock')], { encoding: 'utf8', timeout: 120_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe("the forwarder's C codec against the CNI wire's vectors", () => {
  it("writes every request vector's bytes, reads every answer vector as stated, has the file's limits", () => {
    const run = drive(VECTORS_FILE);
    assert.equal(run.stderr, '', 'the driver (or a sanitizer) wrote to stderr');
    assert.equal(run.status, 0, run.stdout);
    const counts = /^checked (\d+) requests, (\d+) answers, (\d+) limits; 0 mismatches$/m.exec(run.stdout);
    assert.ok(counts !== null, run.stdout);
    const text = readFileSync(VECTORS_FILE, 'utf8');
    const count = (word: string): number => text.split('\n').filter((line) => line.startsWith(`${word} `)).length;
    assert.deepEqual(counts.slice(1).map(Number), [count('request'), count('answer'), count('limit')]);
  });

  it("reports C request bytes that differ from a vector, an answer read otherwise, a limit unlike the file's", () => {
    let text = readFileSync(VECTORS_FILE, 'utf8');
    const plant = (from: RegExp, to: string): void => {
      assert.match(text, from);
      text = text.replace(from, to);
    };
    // One byte of the first request's head ("POST" -> "POSU"), an exit code, a limit's value, and
    // a limit the C side does not have; one limit left out.
    plant(/^(request add-every-variable\n(?:.*\n)*?sends x:504f53)54/m, '$155');
    plant(/^prints 255 /m, 'prints 254 ');
    plant(/^limit max-variable-bytes \d+$/m, 'limit max-variable-bytes 131073');
    plant(/^limit max-exit-code \d+\n/m, 'limit max-stdout-lines 1\n');
    const planted = join(dir, 'planted-vectors.txt');
    writeFileSync(planted, text);
    const run = drive(planted);
    assert.equal(run.status, 1, run.stdout);
    const reported = run.stdout
      .split('\n')
      .filter((line) => line.startsWith('mismatch '))
      .map((line) => line.slice(0, line.indexOf(':')));
    assert.deepEqual(reported.sort(), [
      'mismatch answer exit-code-at-the-limit',
      'mismatch limit max-exit-code',
      'mismatch limit max-stdout-lines',
      'mismatch limit max-variable-bytes',
      'mismatch request add-every-variable',
    ]);
  });
});
