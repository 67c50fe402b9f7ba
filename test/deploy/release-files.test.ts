/**
 * What a release carries besides the code: the licence package.json names, in full, and a changelog
 * whose newest version is package.json's — the version `warren version` prints and the image and the
 * manifests are tagged with (test/deploy/manifests.test.ts holds the manifests to the image tag).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { imageTag } from '../../scripts/build-image.ts';
import { WARREN_VERSION } from '../../src/agent/server/version.ts';
import { REPO } from '../helpers/processes.ts';

const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { license: string; version: string };

describe('the release files', () => {
  it('carry the licence package.json names, whole', () => {
    assert.equal(pkg.license, 'Apache-2.0');
    const text = readFileSync(join(REPO, 'LICENSE'), 'utf8');
    assert.match(text, /Apache License\s+Version 2\.0, January 2004/);
    assert.match(text, /TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION/);
    assert.match(text, /END OF TERMS AND CONDITIONS/);
  });

  it("give the changelog's newest version as the one package.json, warren version and the image say", () => {
    const headings = [...readFileSync(join(REPO, 'CHANGELOG.md'), 'utf8').matchAll(/^## (\S+)/gm)].map((m) => m[1]);
    const released = headings.filter((h) => h !== 'Unreleased');
    assert.ok(released.length > 0, 'the changelog names at least one version');
    assert.equal(released[0], pkg.version, 'the newest version in CHANGELOG.md');
    assert.equal(WARREN_VERSION, pkg.version);
    assert.equal(imageTag(), pkg.version);
  });
});
