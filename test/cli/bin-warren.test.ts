/**
 * bin/warren runs the command line from the bundle (dist/cli, `npm run build`) only while no
 * source of it is newer, and the sources otherwise; the bundle's compile cache is used only in a
 * directory of its user's that no one else can write. Each case runs a copy of the tree (bin, the
 * bundle, the sources) in a directory of its own, so this checkout's bundle is never touched.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  utimesSync,
} from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { buildCli } from '../../scripts/build.ts';
import { CHILD_PATH, REPO, tempDir } from '../helpers/processes.ts';

const TRACER = join(REPO, 'test', 'helpers', 'module-trace.ts');

/** A copy of the tree with the bundle built from the sources as they are. */
function copyOfTree(): string {
  const root = tempDir('warren-bin-');
  for (const dir of ['bin', 'src', 'dist/cli'])
    cpSync(join(REPO, dir), join(root, dir), { recursive: true, filter: (path) => !path.includes('.compile-cache-') });
  cpSync(join(REPO, 'package.json'), join(root, 'package.json'));
  symlinkSync(join(REPO, 'node_modules'), join(root, 'node_modules'));
  // cpSync gives every copy a new mtime: the bundle is made as new as the build left it.
  const now = new Date();
  for (const file of readdirSync(join(root, 'dist', 'cli'))) utimesSync(join(root, 'dist', 'cli', file), now, now);
  return root;
}

/** Runs `warren version` from `root`; what ran: the bundle or the sources. */
function versionFrom(root: string): 'bundle' | 'sources' {
  const trace = join(tempDir('warren-bin-trace-'), 'modules');
  const r = spawnSync(process.execPath, [join(root, 'bin', 'warren'), 'version'], {
    env: { PATH: CHILD_PATH, NODE_OPTIONS: `--import ${TRACER}`, WARREN_TEST_MODULE_TRACE: trace },
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^warren \d+\.\d+\.\d+/);
  const modules = readFileSync(trace, 'utf8');
  if (modules.includes(`${root}/dist/cli/main.mjs`)) return 'bundle';
  assert.ok(modules.includes(`${root}/src/cli/main.ts`), `neither the bundle nor the sources ran: ${modules}`);
  return 'sources';
}

describe('bin/warren', () => {
  before(async () => {
    if (!existsSync(join(REPO, 'dist', 'cli', 'main.mjs'))) await buildCli();
  });

  it('runs the bundle when no source of it changed since it was built', () => {
    assert.equal(versionFrom(copyOfTree()), 'bundle');
  });

  it('never runs a bundle older than one of its sources: it runs the sources', () => {
    const root = copyOfTree();
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(root, 'src', 'core', 'errors.ts'), later, later);
    assert.equal(versionFrom(root), 'sources');
  });

  it('runs the sources from a tree with no bundle (a fresh clone)', () => {
    const root = copyOfTree();
    rmSync(join(root, 'dist'), { recursive: true });
    assert.equal(versionFrom(root), 'sources');
    assert.ok(!existsSync(join(root, 'dist')), 'made dist/');
  });

  it('keeps its compile cache in an owner-only directory, and never uses one others can write', () => {
    const root = copyOfTree();
    const cache = join(root, 'dist', 'cli', `.compile-cache-${process.getuid?.()}`);
    assert.equal(versionFrom(root), 'bundle');
    assert.equal(readdirSync(cache).length > 0, true, 'no compile cache written');
    // Emptied and opened to everyone: a cache in it would be code others can write.
    rmSync(cache, { recursive: true });
    mkdirSync(cache);
    chmodSync(cache, 0o777);
    assert.equal(versionFrom(root), 'bundle');
    assert.deepEqual(readdirSync(cache), []);
  });
});
