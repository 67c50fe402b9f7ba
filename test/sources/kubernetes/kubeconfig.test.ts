/**
 * Where the credentials come from: a kubeconfig file when one is named, else the pod's service
 * account — both proven against the fake Kubernetes API over TLS with its bearer token — and an
 * INVALID_CONFIG naming every missing piece when neither is there.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type TestContext, describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.ts';
import { isWarrenError } from '../../../src/core/errors.ts';
import { SERVICE_ACCOUNT_DIR, loadKubeConfig } from '../../../src/sources/kubernetes/kubeconfig.ts';
import { PodSource } from '../../../src/sources/kubernetes/pod-source.ts';
import type { KubeAccess } from '../../../src/store/kubernetes/kube-access.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { tempDir, waitFor } from '../../helpers/processes.ts';
import { silentLogger } from '../../helpers/logger.ts';

/** Lists this node's pods through `kubeConfig`: the names listed. */
async function listedWith(kubeConfig: KubeAccess): Promise<string[]> {
  const source = new PodSource({ kubeConfig, node: 'node-1', clock: new ManualClock(), logger: silentLogger });
  for await (const item of source.events(new AbortController().signal)) {
    if (item.kind === 'listed') return [...item.pods.values()].map((p) => p.name);
  }
  throw new Error('the source ended without a listing');
}

async function fake(t: TestContext): Promise<FakeKubeApi> {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.createPod({ metadata: { name: 'web', namespace: 'default' }, spec: { nodeName: 'node-1', containers: [] } });
  return api;
}

function assertInvalid(run: () => unknown, ...mentions: RegExp[]): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(isWarrenError(error, 'INVALID_CONFIG'), String(error));
    for (const mention of mentions) assert.match(error.message, mention);
    return true;
  });
}

describe('loadKubeConfig', () => {
  it('reads a kubeconfig file when one is named', async (t) => {
    const api = await fake(t);
    const kubeConfig = loadKubeConfig(api.kubeconfigPath);
    assert.equal(kubeConfig.getCurrentCluster()?.server, api.url);
    assert.deepEqual(await listedWith(kubeConfig), ['web']);
  });

  it('uses the service account when no file is named (in-cluster)', async (t) => {
    const api = await fake(t);
    const root = tempDir();
    const dir = join(root, SERVICE_ACCOUNT_DIR);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'token'), api.token);
    writeFileSync(join(dir, 'ca.crt'), api.caPem);
    writeFileSync(join(dir, 'namespace'), 'warren');
    const before = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
    const kubeConfig = loadKubeConfig(undefined, {
      root,
      env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: new URL(api.url).port },
    });
    assert.equal(kubeConfig.getCurrentCluster()?.server, api.url);
    assert.deepEqual(
      { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT },
      before,
      'the process environment is left as it was',
    );
    assert.deepEqual(await listedWith(kubeConfig), ['web']);
    await waitFor('the token to have been sent', () => (api.requests.some((r) => r.status === 200) ? true : undefined));
  });

  it('names everything missing when there is no file and no service account', () => {
    const root = tempDir();
    assertInvalid(
      () => loadKubeConfig(undefined, { root, env: {} }),
      /--kubeconfig/,
      /KUBERNETES_SERVICE_HOST is not set/,
      /KUBERNETES_SERVICE_PORT is not set/,
      /serviceaccount\/token is missing/,
      /serviceaccount\/ca\.crt is missing/,
    );
    assertInvalid(
      () => loadKubeConfig('', { root, env: { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' } }),
      /token is missing/,
    );
  });

  it('refuses a kubeconfig file that is missing, unreadable as YAML, or names no cluster', () => {
    const dir = tempDir();
    const missing = join(dir, 'nope');
    assertInvalid(() => loadKubeConfig(missing), new RegExp(`cannot load the kubeconfig ${missing}`), /ENOENT/);
    const garbage = join(dir, 'garbage');
    writeFileSync(garbage, 'clusters: [\n');
    assertInvalid(() => loadKubeConfig(garbage), /cannot load the kubeconfig/);
    const empty = join(dir, 'empty');
    writeFileSync(empty, JSON.stringify({ apiVersion: 'v1', kind: 'Config', clusters: [], users: [], contexts: [] }));
    assertInvalid(() => loadKubeConfig(empty), /names no usable cluster/, /no current-context/);
  });
});
