/**
 * Every npm package with an install script is reviewed in package.json's `allowScripts` (issue 34,
 * item 17: `npm install` listed two unexplained ones), by name: the lockfile records no registry
 * address, which a pinned entry (`name@version`) is matched by. The README says why each runs or not.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { REPO } from '../helpers/processes.ts';

const manifest = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  allowScripts?: Record<string, unknown>;
};
const lock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { hasInstallScript?: boolean }>;
};

describe('install scripts', () => {
  const withScripts = Object.entries(lock.packages)
    .filter(([path, p]) => path !== '' && p.hasInstallScript === true)
    .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));

  it('reviews every package of the lockfile that has one, by name, and no other', () => {
    const reviewed = Object.entries(manifest.allowScripts ?? {});
    for (const [name, allowed] of reviewed) assert.equal(typeof allowed, 'boolean', name);
    assert.deepEqual(reviewed.map(([name]) => name).sort(), [...new Set(withScripts)].sort());
  });

  it('says in the README why each runs or not', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const said = readme.slice(readme.indexOf('`allowScripts`'), readme.indexOf('`allowScripts`') + 800);
    for (const name of withScripts) assert.match(said, new RegExp(`${name}'s (runs|does not)`), name);
  });
});
