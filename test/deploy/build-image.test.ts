/**
 * The pure parts of scripts/build-image.ts, without building an image (image.test.ts builds and
 * runs one): which package a path under node_modules belongs to, deciding what the production
 * copy keeps; and the shared libraries ldd names for an executable, which the image carries.
 */
import assert from 'node:assert/strict';
import { realpathSync } from 'node:fs';
import { describe, it } from 'node:test';
import { FORWARDER_BINARY, buildForwarder } from '../../scripts/build.ts';
import { packageRoot, sharedLibraries } from '../../scripts/build-image.ts';

describe('packageRoot', () => {
  it('names the package a path under node_modules is in, scoped or nested', () => {
    assert.equal(packageRoot('pino'), 'pino');
    assert.equal(packageRoot('pino/lib/levels.js'), 'pino');
    assert.equal(packageRoot('@grpc/grpc-js/build/src/index.js'), '@grpc/grpc-js');
    assert.equal(packageRoot('a/node_modules'), 'a');
    assert.equal(packageRoot('a/node_modules/b/index.js'), 'a/node_modules/b');
    assert.equal(packageRoot('a/node_modules/@s/c/package.json'), 'a/node_modules/@s/c');
  });

  it('names none for what belongs to no package: the top, a scope directory, .bin', () => {
    assert.equal(packageRoot(''), undefined);
    assert.equal(packageRoot('@grpc'), undefined);
    assert.equal(packageRoot('.bin'), undefined);
    assert.equal(packageRoot('.bin/tsc'), undefined);
    assert.equal(packageRoot('.package-lock.json'), undefined);
  });

  it('gives a nested .bin or scope directory to the package whose node_modules holds it', () => {
    assert.equal(packageRoot('a/node_modules/.bin/x'), 'a');
    assert.equal(packageRoot('a/node_modules/@s'), 'a');
  });
});

describe('sharedLibraries', () => {
  it("lists this Node's libraries and its dynamic loader as absolute paths, without the vDSO", () => {
    const libraries = sharedLibraries(realpathSync(process.execPath));
    assert.ok(libraries.length > 0);
    for (const path of libraries) assert.ok(path.startsWith('/'), path);
    assert.ok(
      libraries.some((path) => /\/ld-linux[^/]*\.so/.test(path)),
      'the loader',
    );
    assert.ok(
      libraries.some((path) => /\/libc\.so/.test(path)),
      'libc',
    );
    assert.ok(!libraries.some((path) => path.includes('vdso')));
  });

  it('lists none for a static executable (the forwarder)', () => {
    buildForwarder();
    assert.deepEqual(sharedLibraries(FORWARDER_BINARY), []);
  });
});
