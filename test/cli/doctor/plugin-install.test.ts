/**
 * The plugin as a runtime finds it in a bin dir: after `warren install` everything is in place;
 * a missing or non-regular `warren` is what the runtime passes over, one that cannot be run is
 * what it fails on; the fallback in warren.d/ is checked beside it.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { inspectPluginInstall } from '../../../src/cli/doctor/plugin-install.ts';
import { install } from '../../../src/cli/install.ts';
import { tempDir } from '../../helpers/processes.ts';

/** A bin dir with the plugin installed by `install`, from a build of the test's own. */
function installed(): string {
  const from = tempDir('warren-doctor-build-');
  writeFileSync(join(from, 'warren-forwarder'), '#!/bin/sh\n');
  writeFileSync(join(from, 'warren'), '// bundle\n');
  const dir = tempDir('warren-doctor-bin-');
  install({ cniBinDir: dir, from, link: true });
  return dir;
}

describe('the plugin in a bin dir', () => {
  it('is in place after `warren install`', () => {
    const dir = installed();
    assert.deepEqual(inspectPluginInstall(dir), {
      binDir: dir,
      forwarder: { kind: 'ok' },
      node: { kind: 'ok' },
      bundle: { kind: 'ok' },
    });
  });

  it('is missing from an empty dir and from a dir that does not exist', () => {
    const empty = tempDir('warren-doctor-bin-');
    assert.deepEqual(inspectPluginInstall(empty).forwarder, {
      kind: 'missing',
      reason: `${empty}/warren does not exist`,
    });
    const none = join(empty, 'none');
    assert.equal(inspectPluginInstall(none).forwarder.kind, 'missing');
  });

  it('is passed over when `warren` is a directory or a link to nothing', () => {
    const dir = tempDir('warren-doctor-bin-');
    mkdirSync(join(dir, 'warren'));
    assert.deepEqual(inspectPluginInstall(dir).forwarder, { kind: 'missing', reason: `${dir}/warren is not a file` });
    const linked = tempDir('warren-doctor-bin-');
    symlinkSync(join(linked, 'gone'), join(linked, 'warren'));
    assert.deepEqual(inspectPluginInstall(linked).forwarder, {
      kind: 'missing',
      reason: `${linked}/warren is a symbolic link to nothing`,
    });
  });

  it('cannot be run when `warren` is not executable', () => {
    const dir = installed();
    chmodSync(join(dir, 'warren'), 0o644);
    assert.deepEqual(inspectPluginInstall(dir).forwarder, {
      kind: 'unusable',
      reason: `${dir}/warren is not executable (mode 644)`,
    });
  });

  it('has no fallback when warren.d/ is gone', () => {
    const dir = installed();
    rmSync(join(dir, 'warren.d'), { recursive: true });
    const found = inspectPluginInstall(dir);
    assert.deepEqual(found.forwarder, { kind: 'ok' });
    assert.deepEqual(found.node, { kind: 'missing', reason: `${dir}/warren.d/node does not exist` });
    assert.deepEqual(found.bundle, { kind: 'missing', reason: `${dir}/warren.d/warren.cjs does not exist` });
  });
});
