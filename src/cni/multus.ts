/**
 * Whether a network config is Multus' own: the meta-plugin that attaches a pod's networks by
 * calling each network's own config (its cluster network's, and one per NetworkAttachmentDefinition
 * the pod names). Next to it Warren is the IPAM of those attachment configs; the node's primary
 * config is Multus', which has no IPAM section of its own to take over. Thin (`multus`) and thick
 * (`multus-shim`) plugins, as a single-plugin config or the first plugin of a list.
 */
import { isPlainObject } from '../core/validate.ts';

const MULTUS_TYPES: ReadonlySet<string> = new Set(['multus', 'multus-shim']);

export function isMultusConfig(config: unknown): boolean {
  if (!isPlainObject(config)) return false;
  if (typeof config.type === 'string') return MULTUS_TYPES.has(config.type);
  const first = Array.isArray(config.plugins) ? config.plugins[0] : undefined;
  return isPlainObject(first) && typeof first.type === 'string' && MULTUS_TYPES.has(first.type);
}

/** The same for a config's text: false for text that is not JSON. */
export function isMultusConfigText(text: string): boolean {
  try {
    return isMultusConfig(JSON.parse(text));
  } catch {
    return false;
  }
}
