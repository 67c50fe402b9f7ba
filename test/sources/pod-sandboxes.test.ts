/**
 * The runtime spec of a pod sandbox, read for its pod and its network namespace
 * (src/sources/containerd/pod-sandboxes.ts), from bytes containerd hands over and nobody checked:
 * a spec that is not JSON, too large, or of the wrong shape gives no pod and no namespace, never an
 * exception or a guess (fuzzed); a well-formed one gives its network namespace and its pod, the
 * spec's annotation before the kubelet's label.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  MAX_SPEC_BYTES,
  networkNamespaceOf,
  podSandboxes,
  specOf,
} from '../../src/sources/containerd/pod-sandboxes.ts';

const bytes = (value: unknown): { type_url: string; value: Uint8Array } => ({
  type_url: 'types.containerd.io/opencontainers/runtime-spec/1/Spec',
  value: Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)),
});

const SPEC = {
  annotations: { 'io.kubernetes.cri.sandbox-uid': 'uid-1' },
  linux: {
    namespaces: [{ type: 'pid' }, { type: 'network', path: '/var/run/netns/cni-1' }, { type: 'ipc' }],
  },
};

describe('a pod sandbox read from its runtime spec', () => {
  it('gives the network namespace and the pod, the spec annotation before the kubelet label', async () => {
    assert.equal(networkNamespaceOf(specOf({ spec: bytes(SPEC) })), '/var/run/netns/cni-1');
    const client = {
      containers: async () => [
        {
          id: 'a',
          labels: { 'io.cri-containerd.kind': 'sandbox', 'io.kubernetes.pod.uid': 'uid-label' },
          spec: bytes(SPEC),
        },
        { id: 'b', labels: { 'io.cri-containerd.kind': 'sandbox', 'io.kubernetes.pod.uid': 'uid-2' }, spec: null },
        { id: 'c', labels: { 'io.cri-containerd.kind': 'container' }, spec: bytes(SPEC) },
      ],
    };
    assert.deepEqual(await podSandboxes(client, 'k8s.io'), [
      { id: 'a', podUID: 'uid-1', netns: '/var/run/netns/cni-1' },
      { id: 'b', podUID: 'uid-2', netns: undefined },
    ]);
  });

  it('gives no namespace for a host-network sandbox, a relative path, or a spec past the size bound', () => {
    const host = { linux: { namespaces: [{ type: 'network' }] } };
    assert.equal(networkNamespaceOf(specOf({ spec: bytes(host) })), undefined);
    const relative = { linux: { namespaces: [{ type: 'network', path: 'netns/x' }] } };
    assert.equal(networkNamespaceOf(specOf({ spec: bytes(relative) })), undefined);
    const huge = { ...SPEC, padding: 'x'.repeat(MAX_SPEC_BYTES) };
    assert.equal(specOf({ spec: bytes(huge) }), undefined);
  });

  it('never throws and never invents a namespace, whatever bytes the spec holds', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 256 }),
          fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
          fc
            .record({ linux: fc.record({ namespaces: fc.array(fc.jsonValue(), { maxLength: 4 }) }) })
            .map((v) => Buffer.from(JSON.stringify(v))),
        ),
        (value) => {
          const netns = networkNamespaceOf(specOf({ spec: { type_url: '', value } }));
          return (
            netns === undefined ||
            (netns.startsWith('/') && Buffer.from(value).toString('utf8').includes(netns.slice(1)))
          );
        },
      ),
    );
  });
});
