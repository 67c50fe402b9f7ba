/**
 * One look at the node's primary config, for the config manager's pass: read it (at most what the
 * plugin reads, never blocking on a FIFO: core/bounded-read.ts), tell Multus' own config apart (beside Multus there is
 * nothing for Warren to write: cni/multus.ts), and derive Warren's config from any other
 * (cni/derived-config.ts). Every way it can fail comes back as a reason naming the file.
 */
import { readRegularFile, unreadReason } from '../../core/bounded-read.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { MAX_CONFIG_BYTES } from '../../cni/config-limits.ts';
import { type Derivation, deriveConfig } from '../../cni/derived-config.ts';
import { isMultusConfigText } from '../../cni/multus.ts';
import type { CniVersion } from '../../cni/spec.ts';

export type PrimaryReading =
  | { readonly kind: 'unusable'; readonly reason: string }
  | { readonly kind: 'multus' }
  | { readonly kind: 'derived'; readonly derived: Extract<Derivation, { ok: true }> };

export function readPrimary(
  primary: { readonly path: string; readonly name: string },
  o: {
    readonly cniVersionMax: CniVersion;
    readonly socket?: string | undefined;
    readonly journalDir?: string | undefined;
  },
): PrimaryReading {
  let text: string;
  try {
    const read = readRegularFile(primary.path, MAX_CONFIG_BYTES);
    if (read.kind !== 'read') throw new Error(unreadReason(read));
    text = read.text;
  } catch (error) {
    return { kind: 'unusable', reason: `${primary.name}: cannot be read (${messageOf(error)})` };
  }
  if (isMultusConfigText(text)) return { kind: 'multus' };
  const derived = deriveConfig({
    primaryName: primary.name,
    primaryText: text,
    cniVersionMax: o.cniVersionMax,
    ...defined({ socket: o.socket, journalDir: o.journalDir }),
  });
  return derived.ok ? { kind: 'derived', derived } : { kind: 'unusable', reason: derived.reason };
}
