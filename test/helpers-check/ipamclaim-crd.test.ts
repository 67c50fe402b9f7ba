/**
 * KubeVirt's IPAMClaim CRD fixture as the fake API server serves it (test/helpers/ipamclaim-crd.ts):
 * namespaced under k8s.cni.cncf.io/v1alpha1 with a status subresource, spec.network and
 * spec.interface required, a status with both ips and ownerPod, at most two addresses — and only
 * the keywords the fake does not implement dropped (CEL rules, formats), everything else kept.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeApiClient } from '../../src/store/kubernetes/api-client.ts';
import { loadKubeConfig } from '../../src/sources/kubernetes/kubeconfig.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { ipamClaimCrd } from '../helpers/ipamclaim-crd.ts';

const PATH = '/apis/k8s.cni.cncf.io/v1alpha1/namespaces/vms/ipamclaims';

describe('the IPAMClaim CRD fixture in the fake API server', () => {
  let api: FakeKubeApi;
  let client: KubeApiClient;
  before(async () => {
    api = await startFakeKubeApi({ crds: [ipamClaimCrd()] });
    client = await KubeApiClient.open({ kubeConfig: loadKubeConfig(api.kubeconfigPath) });
  });
  after(async () => {
    client?.close();
    await api?.stop();
  });

  const create = (spec: Record<string, unknown>, name = 'vm.net') =>
    client.send('create', {
      method: 'POST',
      path: PATH,
      body: { apiVersion: 'k8s.cni.cncf.io/v1alpha1', kind: 'IPAMClaim', metadata: { name }, spec },
    });
  const patchStatus = (name: string, status: Record<string, unknown>) =>
    client.send('patch', {
      method: 'PATCH',
      path: `${PATH}/${name}/status`,
      contentType: 'application/merge-patch+json',
      body: { status },
    });

  it('keeps everything of the upstream schema but the CEL rules and formats', () => {
    const text = JSON.stringify(ipamClaimCrd());
    assert.doesNotMatch(text, /x-kubernetes-validations|"format"/);
    assert.match(text, /"maxItems":2/);
    assert.match(text, /"required":\["interface","network"\]/);
    assert.match(text, /"required":\["ips","ownerPod"\]/);
  });

  it('serves claims in a namespace, requiring spec.network and spec.interface', async () => {
    assert.equal((await create({ network: 'tenant', interface: 'pod1' })).status, 201);
    const missing = await create({ interface: 'pod1' }, 'no-network.net');
    assert.equal(missing.status, 422);
    assert.match(JSON.stringify(missing.body), /spec\.network: Required value/);
  });

  it('takes a status of ips and ownerPod through the subresource, at most two addresses, both required', async () => {
    assert.equal((await patchStatus('vm.net', { ips: ['10.0.0.5/24'], ownerPod: 'launcher' })).status, 200);
    assert.deepEqual(api.object('ipamclaims', 'vm.net', 'vms')?.status, { ips: ['10.0.0.5/24'], ownerPod: 'launcher' });
    const three = await patchStatus('vm.net', { ips: ['10.0.0.5/24', 'fd00::5/64', '10.0.0.6/24'] });
    assert.equal(three.status, 422);
    assert.equal((await create({ network: 'tenant', interface: 'pod2' }, 'vm2.net')).status, 201);
    const half = await patchStatus('vm2.net', { ips: ['10.0.0.7/24'] });
    assert.equal(half.status, 422);
    assert.match(JSON.stringify(half.body), /status\.ownerPod: Required value/);
  });
});
