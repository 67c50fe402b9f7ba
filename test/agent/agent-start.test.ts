/**
 * What an agent start costs: it loads only the client libraries its options use. Loading every
 * one of them (etcd3, @kubernetes/client-node, @grpc/grpc-js) cost each start about a second of
 * CPU before the agent could serve (issue 24); the start's CPU and wall time are measured in
 * `npm run bench` (bench/agent-start.ts). The agent on the kubernetes store with the Kubernetes
 * sources on loads no file of @kubernetes/client-node, from the sources or the bundle, nor a chunk
 * of it: it speaks to the API server through its own client and kubeconfig loader (issue 36: the
 * library's index loaded every generated API and model, ~15 MiB of an idle agent, and even the
 * parts of it once bundled kept the agent above its memory limit; bench/footprint.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startAgent } from '../helpers/agent.ts';
import { startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { kubeStoreArgs } from '../helpers/kube-store.ts';
import { REPO, tempDir } from '../helpers/processes.ts';

const TRACER = join(REPO, 'test', 'helpers', 'module-trace.ts');
const CLIENT_LIBRARIES = ['etcd3', '@kubernetes/client-node', '@grpc/grpc-js'] as const;

/** Whether the agent ran from the bundle (dist/cli), not the sources. */
const fromBundle = (modules: readonly string[]): boolean => modules.some((url) => url.endsWith('/dist/cli/main.mjs'));

/** The bundle's chunks among `modules` that hold the Kubernetes client (its KubeConfig). */
const kubernetesClientChunks = (modules: readonly string[]): string[] =>
  [...new Set(modules)].filter(
    (url) => url.includes('/dist/cli/') && readFileSync(new URL(url), 'utf8').includes('KubeConfig = class'),
  );

/** The npm packages among the modules an agent started with `args` had loaded once it served. */
async function packagesLoadedBy(args: readonly string[]): Promise<{ packages: Set<string>; modules: string[] }> {
  const trace = join(tempDir('warren-agent-start-trace-'), 'modules');
  const agent = await startAgent({
    args,
    env: { NODE_OPTIONS: `--import ${TRACER}`, WARREN_TEST_MODULE_TRACE: trace },
  });
  try {
    // Read while it serves: what the start and the first answers needed, nothing later.
    const modules = readFileSync(trace, 'utf8').split('\n').filter(Boolean);
    const packages = new Set(
      modules.flatMap((url) => [...(/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.slice(1, 2) ?? [])]),
    );
    return { packages, modules };
  } finally {
    await agent.stop();
  }
}

describe('an agent start', () => {
  it('with etcd, Kubernetes, containerd and the plugin registry off loads none of their client libraries', async () => {
    const { packages, modules } = await packagesLoadedBy([
      '--warm-up',
      '0',
      '--containerd',
      'off',
      '--kubernetes',
      'off',
      '--store',
      'sqlite',
      '--plugins-dir',
      '',
    ]);
    assert.ok(
      modules.some((url) => /\/(src|dist)\/cli\/main\.(ts|mjs)$/.test(url)),
      `the trace saw the agent's own modules: ${modules.slice(0, 5).join(', ')}`,
    );
    for (const library of CLIENT_LIBRARIES)
      assert.ok(!packages.has(library), `${library} loaded; packages: ${[...packages].join(', ')}`);
    assert.deepEqual(kubernetesClientChunks(modules), [], 'the bundled Kubernetes client loaded');
  });

  it('with the default store and no Kubernetes loads neither etcd3 nor @kubernetes/client-node', async () => {
    // startAgent's other defaults: the plugin registry on, containerd off (no containerd here).
    const { packages, modules } = await packagesLoadedBy([]);
    for (const library of ['etcd3', '@kubernetes/client-node'])
      assert.ok(!packages.has(library), `${library} loaded; packages: ${[...packages].join(', ')}`);
    assert.deepEqual(kubernetesClientChunks(modules), [], 'the bundled Kubernetes client loaded');
  });

  it('on the kubernetes store with the Kubernetes sources on loads no file of @kubernetes/client-node, nor a chunk of it', async (t) => {
    const api = await startFakeKubeApi({ crds: 'deploy' });
    try {
      api.createNode('test-node');
      const { packages, modules } = await packagesLoadedBy(['--warm-up', '0', ...kubeStoreArgs(api, 'test-node')]);
      assert.ok(!packages.has('@kubernetes/client-node'), `packages: ${[...packages].join(', ')}`);
      if (!fromBundle(modules)) return t.skip('the agent ran from the sources (no bundle, or one older than them)');
      // Before issue 36's footprint work: one chunk, the library's parts Warren used.
      assert.deepEqual(kubernetesClientChunks(modules), [], 'a bundled Kubernetes client loaded');
    } finally {
      await api.stop();
    }
  });
});
