/**
 * The settings that choose the store (settings/store-rows.ts): `--store kubernetes`, the default
 * that follows the Kubernetes source (safe by default: the DaemonSet shares its pools), and the
 * namespace of the Kubernetes store's Leases.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveAgentOptions } from '../../../src/agent/settings/options.ts';
import { SETTINGS } from '../../../src/agent/settings/table.ts';
import { tempDir } from '../../helpers/processes.ts';

const resolve = (flags: Parameters<typeof resolveAgentOptions>[0], env: NodeJS.ProcessEnv = {}) =>
  resolveAgentOptions({ stateDir: tempDir(), ...flags }, env, 0, '/');

describe('store settings', () => {
  it('defaults the store to kubernetes with the Kubernetes source on, so no default hands one address to two nodes', () => {
    assert.equal(resolve({ kubernetes: 'on' }).store, 'kubernetes');
    assert.equal(resolve({}, { WARREN_KUBERNETES: 'on' }).store, 'kubernetes');
    assert.equal(resolve({}).store, 'sqlite');
    assert.equal(resolve({ kubernetes: 'off' }).store, 'sqlite');
    assert.match(SETTINGS.store.help, /; default kubernetes with --kubernetes on, sqlite otherwise$/);
  });

  it('takes --store and WARREN_STORE over the default rule, kubernetes among them', () => {
    assert.equal(resolve({ kubernetes: 'on', store: 'sqlite' }).store, 'sqlite');
    assert.equal(resolve({ kubernetes: 'on' }, { WARREN_STORE: 'sqlite' }).store, 'sqlite');
    assert.equal(resolve({ store: 'kubernetes' }).store, 'kubernetes', 'the pod source may be off');
    assert.equal(resolve({}, { WARREN_STORE: 'kubernetes' }).store, 'kubernetes');
    assert.throws(() => resolve({ store: 'k8s' }), /--store \/ WARREN_STORE: "k8s" is not sqlite, kubernetes or etcd/);
  });

  it("takes the Leases' namespace from --kube-namespace, else the pod's own (POD_NAMESPACE), else warren", () => {
    assert.equal(resolve({}).kubeNamespace, 'warren');
    assert.equal(resolve({}, { POD_NAMESPACE: 'kube-system' }).kubeNamespace, 'kube-system');
    assert.equal(resolve({}, { POD_NAMESPACE: '' }).kubeNamespace, 'warren');
    assert.equal(resolve({ kubeNamespace: 'net' }, { POD_NAMESPACE: 'kube-system' }).kubeNamespace, 'net');
    assert.equal(resolve({}, { WARREN_KUBE_NAMESPACE: 'env-ns' }).kubeNamespace, 'env-ns');
    for (const bad of ['Warren', 'a_b', '-x', 'x'.repeat(64)])
      assert.throws(() => resolve({ kubeNamespace: bad }), /--kube-namespace \/ WARREN_KUBE_NAMESPACE: .* namespace/);
  });
});
