/**
 * The etcd helper's own promises (test/helpers/etcd.ts): the ports of one cluster are all different
 * (asked one after another, the kernel could hand a port just freed out again, and etcd refused the
 * cluster as "has duplicate url", which left its test waiting out the whole deadline), and a member
 * that exits while the cluster comes up fails the start at once, naming it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { freePorts, startEtcd } from '../helpers/etcd.ts';

describe('the etcd helper', () => {
  it('hands out distinct ports for the members of one cluster', async () => {
    for (let round = 0; round < 20; round++) {
      const ports = await freePorts(6);
      assert.equal(new Set(ports).size, 6, `ports ${ports.join(' ')}`);
    }
  });

  it('fails at once, naming the member, when one exits while the cluster comes up', async () => {
    // An argument etcd refuses: every member exits at start. (Before, the start waited out its
    // whole deadline and said it timed out waiting for a member to be healthy.)
    await assert.rejects(startEtcd(1, undefined, ['--no-such-flag']), /etcd member m1 exited/);
  });
});
