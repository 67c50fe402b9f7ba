/**
 * The "ipamclaims" ADD planner and the claim cache behind it: the element on the ADD's interface
 * names the claim and the plan is held by `ipamclaim/<pod namespace>/<claim>`; what cannot be
 * served is refused with code 7 naming the pod and the claim; the common path makes no request.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type PodView, podViewOf } from '../../../../src/agent/kubernetes/pod-directory.ts';
import { ClaimCache, type ClaimRef } from '../../../../src/agent/kubernetes/ipam-claims/claim-cache.ts';
import { claimOfHolding, ipamClaimPlanner } from '../../../../src/agent/kubernetes/ipam-claims/claim-planner.ts';
import type { AddPlan } from '../../../../src/agent/server/add-plan.ts';
import { parseNetConf } from '../../../../src/cni/netconf.ts';
import { WarrenError } from '../../../../src/core/errors.ts';
import { formatIP } from '../../../../src/ipam/address.ts';

const RAW_CONF = {
  cniVersion: '1.0.0',
  name: 'tenant-a',
  type: 'bridge',
  ipam: { type: 'warren', range: '10.77.0.0/24' },
};
const conf = parseNetConf(RAW_CONF, 'ADD');
const initial: AddPlan = { ranges: conf.ipam.ranges, requested: [] };
const POD = { namespace: 'vms', name: 'virt-launcher-vm1-abcde', uid: 'u-1' };

function launcher(annotations: Record<string, string>): PodView {
  const view = podViewOf({ metadata: { ...POD, annotations }, spec: { nodeName: 'n1' } });
  assert.ok(view);
  return view;
}

function claimObject(name: string, extra: { network?: string; deleting?: boolean; ipRequests?: string[] } = {}) {
  return {
    apiVersion: 'k8s.cni.cncf.io/v1alpha1',
    kind: 'IPAMClaim',
    metadata: {
      name,
      namespace: 'vms',
      uid: `claim-${name}`,
      resourceVersion: '7',
      ...(extra.deleting ? { deletionTimestamp: '2026-11-27T05:00:00Z' } : {}),
    },
    spec: {
      network: extra.network ?? 'tenant-a',
      interface: '',
      ...(extra.ipRequests ? { ipRequests: extra.ipRequests } : {}),
    },
  };
}

/** A planner over one pod and a cache of `claims`, counting the GETs of claims. */
function setup(annotations: Record<string, string>, claims: unknown[], listed = true) {
  const gets: ClaimRef[] = [];
  const cache = new ClaimCache({
    fetchClaim: async (ref) => {
      gets.push(ref);
      return claims.find((c) => (c as { metadata: { name: string } }).metadata.name === ref.name);
    },
  });
  if (listed) cache.observe({ kind: 'listed', objects: claims });
  const pod = launcher(annotations);
  const planner = ipamClaimPlanner({ pod: async () => pod, claim: (ref) => cache.claim(ref) });
  return { planner, gets, cache };
}

const networks = (elements: unknown[]) => ({ 'k8s.v1.cni.cncf.io/networks': JSON.stringify(elements) });
const VM_NETWORKS = networks([
  { name: 'tenant-a', namespace: 'vms', interface: 'pod4f1a2b', 'ipam-claim-reference': 'vm1.tenant' },
  { name: 'storage', namespace: 'vms', interface: 'pod9c8d7e' },
]);

function refused(error: unknown, detail: RegExp): boolean {
  assert.ok(error instanceof WarrenError, String(error));
  assert.equal(error.code, 'INVALID_CONFIG');
  assert.match(error.message, /^pod vms\/virt-launcher-vm1-abcde/);
  assert.match(error.message, detail);
  return true;
}

describe('ipamClaimPlanner', () => {
  it('holds the plan by the claim named on the ADD interface, with no API request when the claim is cached', async () => {
    const { planner, gets } = setup(VM_NETWORKS, [claimObject('vm1.tenant')]);
    const plan = await planner(conf, POD, initial, { containerID: 'c1', ifname: 'pod4f1a2b' });
    assert.equal(plan.holding, 'ipamclaim/vms/vm1.tenant');
    assert.deepEqual(plan.ranges, initial.ranges);
    assert.deepEqual(gets, []);
    assert.deepEqual(claimOfHolding(plan.holding), { namespace: 'vms', name: 'vm1.tenant' });
  });

  it('leaves the plan as it is for an interface whose element names no claim, or no element', async () => {
    const { planner } = setup(VM_NETWORKS, [claimObject('vm1.tenant')]);
    assert.equal(await planner(conf, POD, initial, { containerID: 'c1', ifname: 'pod9c8d7e' }), initial);
    assert.equal(await planner(conf, POD, initial, { containerID: 'c1', ifname: 'eth0' }), initial);
    assert.equal(await planner(conf, undefined, initial, { containerID: 'c1', ifname: 'pod4f1a2b' }), initial);
    assert.equal(await planner(conf, POD, initial), initial);
  });

  it('reads the short form (interfaces net1, net2... by position) and the default network on eth0', async () => {
    const short = setup({ 'k8s.v1.cni.cncf.io/networks': 'vms/tenant-a,storage' }, []);
    assert.equal(await short.planner(conf, POD, initial, { containerID: 'c1', ifname: 'net1' }), initial);
    const primary = setup(
      { 'v1.multus-cni.io/default-network': JSON.stringify([{ name: 'default', 'ipam-claim-reference': 'vm1.pod' }]) },
      [claimObject('vm1.pod')],
    );
    const plan = await primary.planner(conf, POD, initial, { containerID: 'c1', ifname: 'eth0' });
    assert.equal(plan.holding, 'ipamclaim/vms/vm1.pod');
  });

  it('reads a claim the watch has not brought yet with one GET, then from the cache', async () => {
    const { planner, gets } = setup(VM_NETWORKS, [claimObject('vm1.tenant')], false);
    const attachment = { containerID: 'c1', ifname: 'pod4f1a2b' };
    assert.equal((await planner(conf, POD, initial, attachment)).holding, 'ipamclaim/vms/vm1.tenant');
    assert.equal((await planner(conf, POD, initial, attachment)).holding, 'ipamclaim/vms/vm1.tenant');
    assert.deepEqual(gets, [{ namespace: 'vms', name: 'vm1.tenant' }]);
  });

  it('refuses a claim that does not exist, naming it (code 7)', async () => {
    const { planner } = setup(VM_NETWORKS, []);
    await assert.rejects(planner(conf, POD, initial, { containerID: 'c1', ifname: 'pod4f1a2b' }), (e) =>
      refused(e, /names IPAMClaim vms\/vm1\.tenant, which does not exist/),
    );
  });

  it('refuses a claim made for another network, or being deleted', async () => {
    const other = setup(VM_NETWORKS, [claimObject('vm1.tenant', { network: 'tenant-b' })]);
    await assert.rejects(other.planner(conf, POD, initial, { containerID: 'c1', ifname: 'pod4f1a2b' }), (e) =>
      refused(e, /made for network "tenant-b", not "tenant-a"/),
    );
    const deleting = setup(VM_NETWORKS, [claimObject('vm1.tenant', { deleting: true })]);
    await assert.rejects(deleting.planner(conf, POD, initial, { containerID: 'c1', ifname: 'pod4f1a2b' }), (e) =>
      refused(e, /which is being deleted/),
    );
  });

  it('refuses an annotation that cannot be read, and a plan another holder holds', async () => {
    const bad = setup({ 'k8s.v1.cni.cncf.io/networks': '[{"name":' }, []);
    await assert.rejects(bad.planner(conf, POD, initial, { containerID: 'c1', ifname: 'net1' }), (e) =>
      refused(e, /annotation k8s\.v1\.cni\.cncf\.io\/networks: not valid JSON/),
    );
    // eth0 is the cluster network's: the networks annotation is not its business.
    assert.equal(await bad.planner(conf, POD, initial, { containerID: 'c1', ifname: 'eth0' }), initial);
    const { planner } = setup(VM_NETWORKS, [claimObject('vm1.tenant')]);
    const held = { ...initial, holding: 'statefulset/vms/db/0' };
    await assert.rejects(planner(conf, POD, held, { containerID: 'c1', ifname: 'pod4f1a2b' }), (e) =>
      refused(e, /already held as statefulset\/vms\/db\/0/),
    );
  });

  it('on an agent whose store keeps no holdings, refuses a pod naming a claim rather than give it an address that would not follow the VM', async () => {
    const pod = launcher(VM_NETWORKS);
    let reads = 0;
    const planner = ipamClaimPlanner({
      pod: async () => {
        reads += 1;
        return pod;
      },
      claim: async () => undefined,
      unsupported: 'held only on the kubernetes store (this agent runs --store sqlite)',
    });
    const persistent = parseNetConf({ ...RAW_CONF, allowPersistentIPs: true }, 'ADD');
    await assert.rejects(planner(persistent, POD, initial, { containerID: 'c1', ifname: 'pod4f1a2b' }), (e) =>
      refused(e, /names IPAMClaim vms\/vm1\.tenant, but held only on the kubernetes store/),
    );
    assert.equal(await planner(persistent, POD, initial, { containerID: 'c1', ifname: 'pod9c8d7e' }), initial);
    // A network not made for persistent IPs is served there as before, with no pod read.
    reads = 0;
    assert.equal(await planner(conf, POD, initial, { containerID: 'c1', ifname: 'pod4f1a2b' }), initial);
    assert.equal(reads, 0);
  });

  it('answers try-again (11) when the pod cannot be read: whether it names a claim is unknown', async () => {
    const planner = ipamClaimPlanner({
      pod: async () => {
        throw new Error('fetch failed');
      },
      claim: async () => undefined,
    });
    await assert.rejects(planner(conf, POD, initial, { containerID: 'c1', ifname: 'pod4f1a2b' }), (e) => {
      assert.ok(e instanceof WarrenError && e.code === 'TRY_AGAIN', String(e));
      assert.match(e.message, /cannot read pod vms\/virt-launcher-vm1-abcde .*: fetch failed/);
      return true;
    });
  });

  it("asks for the claim's spec.ipRequests, one per family, beside what the plan asks", async () => {
    const { planner } = setup(VM_NETWORKS, [claimObject('vm1.tenant', { ipRequests: ['10.77.0.40/24'] })]);
    const plan = await planner(conf, POD, initial, { containerID: 'c1', ifname: 'pod4f1a2b' });
    assert.deepEqual(plan.requested.map(formatIP), ['10.77.0.40']);
  });
});

describe('ClaimCache', () => {
  const cache = () => new ClaimCache({ fetchClaim: async () => undefined });

  it('answers the claims a deletion or a listing took away, and nothing for a claim of its name made since', () => {
    const c = cache();
    assert.deepEqual(c.observe({ kind: 'listed', objects: [claimObject('a'), claimObject('b'), { bogus: 1 }] }), []);
    assert.equal(c.status().claims, 2);
    assert.deepEqual(
      c.observe({ kind: 'deleted', object: claimObject('a') }).map((g) => g.name),
      ['a'],
    );
    assert.equal(c.peek({ namespace: 'vms', name: 'a' }), undefined);
    const b2 = { ...claimObject('b'), metadata: { ...claimObject('b').metadata, uid: 'newer' } };
    assert.deepEqual(c.observe({ kind: 'added', object: b2 }), []);
    // The older b's deletion, late: the newer b stands, its name's holding goes on.
    assert.deepEqual(c.observe({ kind: 'deleted', object: claimObject('b') }), []);
    assert.deepEqual(
      c.observe({ kind: 'listed', objects: [] }).map((g) => g.name),
      ['b'],
    );
  });

  it('a claim without a spec.network is not one (skipped)', () => {
    const c = cache();
    const object = { metadata: { name: 'x', namespace: 'vms', uid: 'u' }, spec: {} };
    c.observe({ kind: 'listed', objects: [object] });
    assert.equal(c.status().claims, 0);
  });
});
