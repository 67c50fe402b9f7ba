/**
 * The suites of test/suites.ts cover every test file once: a file in no list would run in no suite
 * (npm test runs only the listed files), one in two would run twice, a listed file that is gone
 * would make the runner fail on a name. And a unit file does not import the helpers that start real
 * parts, which is what the unit suite promises not to do.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { REPO } from './helpers/processes.ts';
import { E2E_ALONE, E2E_FILES, UNIT_FILES } from './suites.ts';

/** Every `*.test.ts` under test/, as a path from the repository's root. */
function testFiles(): string[] {
  return readdirSync(join(REPO, 'test'), { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.test.ts'))
    .map((path) => relative(REPO, join(REPO, 'test', path)))
    .sort();
}

const lists: Record<string, readonly string[]> = { UNIT_FILES, E2E_FILES, E2E_ALONE: Object.keys(E2E_ALONE) };

/** Helpers that start a real part: an agent, namespaces, etcd, containerd, podman, a user, a plugin. */
const REAL_PART_HELPERS = [
  ...['agent', 'cni', 'containerd', 'cri', 'etcd'],
  ...['mounts', 'netns', 'podman', 'sandbox-image', 'unix-user'],
];

describe('test suites', () => {
  it('every test file is in exactly one suite', () => {
    const where = new Map<string, string[]>();
    for (const [name, files] of Object.entries(lists)) {
      for (const file of files) where.set(file, [...(where.get(file) ?? []), name]);
    }
    const inNone = testFiles().filter((file) => !where.has(file));
    assert.deepEqual(inNone, [], 'test files in no suite of test/suites.ts: add each to a list there');
    const inTwo = [...where].filter(([, names]) => names.length > 1).map(([file, names]) => `${file}: ${names.join()}`);
    assert.deepEqual(inTwo, [], 'test files listed more than once');
  });

  it('names no file that is not there', () => {
    const present = new Set(testFiles());
    const gone = Object.values(lists)
      .flat()
      .filter((file) => !present.has(file));
    assert.deepEqual(gone, [], 'test/suites.ts names files that are not test files under test/');
  });

  it('no unit file imports a helper that starts a real part', () => {
    const helper = new RegExp(`from '[./]*/helpers/(${REAL_PART_HELPERS.join('|')})\\.ts'`);
    const offenders = UNIT_FILES.filter((file) => helper.test(readFileSync(join(REPO, file), 'utf8')));
    assert.deepEqual(offenders, [], 'unit files importing a helper that starts a real part: they are e2e');
  });

  it('npm test, test:unit and test:e2e run the suites through scripts/test.ts', () => {
    const { scripts } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    assert.equal(scripts.test, 'node scripts/test.ts');
    assert.equal(scripts['test:unit'], 'node scripts/test.ts unit');
    assert.equal(scripts['test:e2e'], 'node scripts/test.ts e2e');
  });
});
