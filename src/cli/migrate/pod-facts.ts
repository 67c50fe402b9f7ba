/**
 * What the migration needs of a pod holding a whereabouts address (pure, no I/O): its UID and
 * node, whether it still runs, and Multus' network-status annotation, which says for each
 * attachment the definition it came from, the interface and the addresses it got. Whereabouts'
 * own reconciler judges an allocation by that annotation too: an address the pod's annotation
 * does not list is a leftover.
 *
 * Guarantees: any JSON gives a value, never an exception; a malformed annotation reads as absent
 * (it can only narrow what is known, never invent an attachment).
 */
import { defined } from '../../core/defined.ts';
import { isPlainObject } from '../../core/validate.ts';
import { parseIP, formatIP } from '../../ipam/address.ts';

export const NETWORK_STATUS_ANNOTATION = 'k8s.v1.cni.cncf.io/network-status';

/** One attachment as Multus reported it. */
export interface AttachmentStatus {
  /** `namespace/name` of the definition, or `name` in the pod's namespace. */
  readonly network: string;
  readonly ifname?: string;
  /** Canonical addresses. */
  readonly addresses: readonly string[];
}

export interface PodFacts {
  readonly uid: string;
  /** Absent while the pod is not scheduled. */
  readonly node?: string;
  /** Succeeded or Failed: its sandbox is gone, and with it the attachment. */
  readonly finished: boolean;
  /** Absent when the pod carries no readable annotation. */
  readonly attachments?: readonly AttachmentStatus[];
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function attachmentsOf(annotation: unknown): AttachmentStatus[] | undefined {
  if (typeof annotation !== 'string') return undefined;
  let entries: unknown;
  try {
    entries = JSON.parse(annotation);
  } catch {
    return undefined;
  }
  if (!Array.isArray(entries)) return undefined;
  const attachments: AttachmentStatus[] = [];
  for (const entry of entries) {
    if (!isPlainObject(entry)) continue;
    const network = text(entry.name);
    if (network === undefined) continue;
    const ifname = text(entry.interface);
    const ips = Array.isArray(entry.ips) ? entry.ips : [];
    const addresses = ips.flatMap((ip) => {
      const parsed = typeof ip === 'string' ? parseIP(ip.split('/')[0] ?? '') : undefined;
      return parsed === undefined ? [] : [formatIP(parsed)];
    });
    attachments.push({ network, ...defined({ ifname }), addresses });
  }
  return attachments;
}

/** The facts of a pod object as the API server answered it; undefined when it has no UID. */
export function podFactsOf(pod: unknown): PodFacts | undefined {
  if (!isPlainObject(pod) || !isPlainObject(pod.metadata)) return undefined;
  const uid = text(pod.metadata.uid);
  if (uid === undefined) return undefined;
  const node = isPlainObject(pod.spec) ? text(pod.spec.nodeName) : undefined;
  const phase = isPlainObject(pod.status) ? text(pod.status.phase) : undefined;
  const annotations = isPlainObject(pod.metadata.annotations) ? pod.metadata.annotations : {};
  const attachments = attachmentsOf(annotations[NETWORK_STATUS_ANNOTATION]);
  return {
    uid,
    ...defined({ node }),
    finished: phase === 'Succeeded' || phase === 'Failed',
    ...defined({ attachments }),
  };
}
