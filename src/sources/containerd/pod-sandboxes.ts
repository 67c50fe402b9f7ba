/**
 * The pod sandboxes containerd's CRI plugin keeps: the containers labelled with the sandbox kind
 * (`io.cri-containerd.kind=sandbox`), each with its pod's UID (its runtime spec's annotation
 * `io.kubernetes.cri.sandbox-uid`, else the kubelet's label `io.kubernetes.pod.uid`) and the network
 * namespace its spec names (`linux.namespaces`, type `network`): the path the CNI ADD was given.
 * Read for addresses no CNI ADD recorded here (`warren migrate whereabouts` carried them over
 * from whereabouts' objects), so the agent can judge them by their namespace like any other
 * (agent/release/sandbox-netns.ts); only when there are such addresses.
 *
 * Guarantees: one List of one namespace's sandboxes a call; a spec that is not JSON, larger than
 * MAX_SPEC_BYTES, or names no network namespace or pod gives none of them, never a guess.
 */
import type { ContainerdClient, ListedContainer } from './client.ts';

/** containerd's CRI names (its pkg/cri constants) and the kubelet's label. */
const KIND_LABEL = 'io.cri-containerd.kind';
const SANDBOX_UID_ANNOTATION = 'io.kubernetes.cri.sandbox-uid';
const POD_UID_LABEL = 'io.kubernetes.pod.uid';
/** A runtime spec larger than this is not read (one is a few KiB). */
export const MAX_SPEC_BYTES = 1 << 20;

export interface PodSandbox {
  readonly id: string;
  /** Its pod's UID; undefined when neither the spec nor the labels say it. */
  readonly podUID: string | undefined;
  /** The network namespace path of its spec; undefined when it names none (host network). */
  readonly netns: string | undefined;
}

/** Every pod sandbox in containerd namespace `namespace` (CRI's is `k8s.io`). */
export async function podSandboxes(
  client: Pick<ContainerdClient, 'containers'>,
  namespace: string,
): Promise<PodSandbox[]> {
  const listed = await client.containers(namespace, [`labels."${KIND_LABEL}"==sandbox`]);
  return listed
    .filter((c) => c.labels[KIND_LABEL] === 'sandbox')
    .map((c) => {
      const spec = specOf(c);
      const annotated = spec?.annotations?.[SANDBOX_UID_ANNOTATION];
      const podUID = typeof annotated === 'string' && annotated !== '' ? annotated : c.labels[POD_UID_LABEL];
      return { id: c.id, podUID, netns: networkNamespaceOf(spec) };
    });
}

interface SpecView {
  readonly annotations?: Readonly<Record<string, unknown>>;
  readonly linux?: { readonly namespaces?: unknown };
}

/** A container's runtime spec, parsed; undefined when absent, too large or not JSON. */
export function specOf(container: Pick<ListedContainer, 'spec'>): SpecView | undefined {
  const bytes = container.spec?.value;
  if (bytes === undefined || bytes.length === 0 || bytes.length > MAX_SPEC_BYTES) return undefined;
  try {
    const spec: unknown = JSON.parse(Buffer.from(bytes).toString('utf8'));
    return typeof spec === 'object' && spec !== null && !Array.isArray(spec) ? (spec as SpecView) : undefined;
  } catch {
    return undefined;
  }
}

/** The `network` namespace path a runtime spec names, if it names one. */
export function networkNamespaceOf(spec: SpecView | undefined): string | undefined {
  const namespaces = spec?.linux?.namespaces;
  if (!Array.isArray(namespaces)) return undefined;
  for (const ns of namespaces) {
    if (typeof ns !== 'object' || ns === null) continue;
    const { type, path } = ns as { type?: unknown; path?: unknown };
    if (type === 'network' && typeof path === 'string' && path.startsWith('/')) return path;
  }
  return undefined;
}
