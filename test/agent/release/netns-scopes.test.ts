/**
 * Which runtime answers for which namespaces (release/netns-scopes.ts), as judgement: what an
 * adapter claimed or declared is what its resync judges and what the CNI service's GC names it
 * for, and what a containerd resync leaves alone; a refused claim changes nothing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CONTAINERD_CRI_NETNS_PREFIXES, NetnsScopes } from '../../../src/agent/release/netns-scopes.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';

const at = (netns: string | undefined): Allocation =>
  ({
    pool: '10.0.0.0/24',
    address: '10.0.0.2',
    network: 'n',
    containerID: 'c',
    ifname: 'eth0',
    node: 'n1',
    createdAt: 0,
    ...(netns === undefined ? {} : { netns }),
  }) as Allocation;

describe('NetnsScopes as judgement', () => {
  it("judges an adapter's allocations by its word alone, and leaves them out of containerd's resync", () => {
    const scopes = new NetnsScopes([{ owner: 'containerd', prefixes: CONTAINERD_CRI_NETNS_PREFIXES }]);
    const podman = { adapter: 'podman', netnsPrefixes: ['/run/netns/netns-'] };
    assert.equal(scopes.claim('podman', podman.netnsPrefixes), undefined);
    const theirs = at('/run/netns/netns-1');
    const containerds = at('/var/run/netns/cni-2');
    assert.equal(scopes.adapterOf(theirs), 'podman');
    assert.equal(scopes.adapterOf(containerds), undefined);
    const never = "containerd's resync never takes an adapter's container for its own gone one";
    assert.equal(scopes.judgedBy(theirs, undefined), false, never);
    assert.equal(scopes.judgedBy(containerds, undefined), true);
    assert.equal(scopes.judgedBy(theirs, podman), true);
    assert.equal(scopes.judgedBy(containerds, podman), false, 'an adapter judges only what it answers for');
    assert.equal(scopes.judgedBy(at(undefined), podman), false);
  });

  it('changes nothing on a refused claim: the first claimant keeps its namespaces', () => {
    const scopes = new NetnsScopes([]);
    assert.equal(scopes.claim('first', ['/run/netns/a-']), undefined);
    assert.match(
      String(scopes.claim('second', ['/run/netns/a-b'])),
      /overlaps "\/run\/netns\/a-", which the runtime adapter "first" answers for/,
    );
    assert.equal(scopes.adapterOf(at('/run/netns/a-b1')), 'first');
    scopes.declare({ adapter: 'third', netnsPrefixes: ['/run/netns/t-'] });
    assert.equal(
      scopes.adapterOf(at('/run/netns/t-1')),
      'third',
      'a declaration (a resync of a claimed listing) is judged by too',
    );
  });
});
