/**
 * The agent runs without @kubernetes/client-node: nothing the agent's command reaches (its static
 * and dynamic imports, the Kubernetes side and the kubernetes store included) imports the library.
 * Its loading was most of what kept the agent on the kubernetes store above the DaemonSet's memory
 * limit (issue 36; sources/kubernetes/kubeconfig.ts says what was measured), so an import of it
 * creeping back is caught here rather than in a node's resident memory.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { buildSync } from 'esbuild';
import { REPO } from '../helpers/processes.ts';

const LIBRARY = '@kubernetes/client-node';

describe('the agent without @kubernetes/client-node', () => {
  it('imports the library from none of the files the agent command reaches', () => {
    const result = buildSync({
      entryPoints: [join(REPO, 'src', 'cli', 'agent-command.ts')],
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      packages: 'external',
      outdir: join(REPO, 'dist', 'architecture-check'),
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const importers = Object.entries(result.metafile.inputs)
      .filter(([, input]) => input.imports.some((i) => i.path === LIBRARY || i.path.startsWith(`${LIBRARY}/`)))
      .map(([file]) => file);
    assert.ok(Object.keys(result.metafile.inputs).some((file) => file.endsWith('kubernetes-wiring.ts')));
    assert.deepEqual(importers, [], `the agent would load ${LIBRARY} through ${importers.join(', ')}`);
  });
});
