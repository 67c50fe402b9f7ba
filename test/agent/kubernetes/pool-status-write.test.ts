/**
 * The WarrenPool status writes, through the real API client on the fake API server over TLS: a write
 * whose client could not be opened (the kubeconfig's CA file not there yet) fails, and the next write,
 * once the file is there, opens the client again and is written.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { isWarrenError } from '../../../src/core/errors.ts';
import { OnDemandClient } from '../../../src/sources/kubernetes/on-demand-client.ts';
import { poolStatusWrite } from '../../../src/agent/kubernetes/pool-status-write.ts';
import { startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { removeDir, tempDir } from '../../helpers/processes.ts';

/** A kubeconfig for the fake server whose CA is read from `caFile` (as a service account's ca.crt is). */
function kubeConfigWithCaFile(server: string, token: string, caFile: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'fake', server, caFile, skipTLSVerify: false }],
    users: [{ name: 'warren', token }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'warren' }],
    currentContext: 'fake',
  });
  return kubeConfig;
}

describe('poolStatusWrite', () => {
  it('opens its client again after an opening that failed, instead of failing every later write', async (t) => {
    const api = await startFakeKubeApi({ crds: 'deploy' });
    const dir = tempDir('warren-pool-status-');
    t.after(async () => {
      await api.stop();
      removeDir(dir);
    });
    api.preload('warrenpools', [
      {
        apiVersion: 'warren.dev/v1alpha1',
        kind: 'WarrenPool',
        metadata: { name: 'gold' },
        spec: { ranges: [{ range: '10.80.0.0/24' }] },
      },
    ]);
    const caFile = join(dir, 'ca.crt');
    const client = OnDemandClient.of(kubeConfigWithCaFile(api.url, api.token, caFile));
    t.after(() => client.close());
    const write = poolStatusWrite(client);
    const status = {
      capacity: '254',
      used: 1,
      blocks: 1,
      nodes: 1,
      observedGeneration: 1,
      updatedAt: '2024-01-01T00:00:00Z',
    };
    const withStatus = () => ({ ...api.object('warrenpools', 'gold'), status });

    await assert.rejects(write(withStatus()), (error: unknown) => {
      assert.ok(isWarrenError(error, 'INVALID_CONFIG'), String(error));
      assert.match(error.message, /ca\.crt/);
      return true;
    });

    writeFileSync(caFile, api.caPem); // the CA is there now (a mount that came late, a rotated file)
    assert.equal(await write(withStatus()), true, 'the next write opens the client again and is written');
    assert.equal((api.object('warrenpools', 'gold')?.status as { used?: number } | undefined)?.used, 1);
  });
});
