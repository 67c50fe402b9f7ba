/**
 * Taking over an announcement left by a process gone from this boot (store/membership.ts
 * goneFromThisBoot): only one made on this host and boot, in this pid namespace, by a pid that no
 * longer runs. An agent in another container (a DaemonSet's old pod while its new one starts) runs
 * whatever this namespace says of its pid, so its announcement is never taken over on that account.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { describe, it } from 'node:test';
import { type NodeRecord, goneFromThisBoot } from '../../src/store/membership.ts';

const here = readlinkSync('/proc/self/ns/pid');
const self: NodeRecord = { node: 'n1', since: 0, host: 'h', bootId: 'b', pid: process.pid, pidNamespace: here };

/** A pid that ran and has exited (reaped): no process has it now, as far as this test can tell. */
function exitedPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

describe('taking over an announcement of a process gone from this boot', () => {
  it('takes over one made here, on this boot, in this pid namespace, by a process that is gone', () => {
    assert.equal(goneFromThisBoot({ ...self, instance: 'old', pid: exitedPid() }, self), true);
  });

  it('never takes over one whose pid was recorded in another pid namespace (another container’s agent)', () => {
    assert.equal(goneFromThisBoot({ ...self, pid: exitedPid(), pidNamespace: 'pid:[1]' }, self), false);
  });

  it('never takes over one recorded without a pid namespace (an older agent), another boot or host, or a live pid', () => {
    const { pidNamespace: _, ...older } = { ...self, pid: exitedPid() };
    assert.equal(goneFromThisBoot(older, self), false);
    assert.equal(goneFromThisBoot({ ...self, pid: exitedPid(), bootId: 'other' }, self), false);
    assert.equal(goneFromThisBoot({ ...self, pid: exitedPid(), host: 'other' }, self), false);
    assert.equal(goneFromThisBoot({ ...self, pid: process.ppid }, self), false, 'a pid that runs');
    assert.equal(goneFromThisBoot({ ...self }, self), false, 'this very process');
  });
});
