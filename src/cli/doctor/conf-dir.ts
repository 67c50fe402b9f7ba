/**
 * The network configs in a CNI conf dir that name Warren, read as the runtime reads them and
 * parsed as the agent parses an ADD: a `.conf` (or `.json`) whose `ipam.type` is "warren", or a
 * `.conflist` (or a `.json` with `plugins`) with a plugin whose `ipam.type` is "warren", that
 * plugin seen with the list's `cniVersion` and `name` as the runtime hands it over. Files are taken
 * in the runtime's order (by name).
 *
 * What each says is kept for the checks: the socket, journal dir and store it asks for, whether it
 * is marked node-local, the whereabouts keys it carries that configure whereabouts itself, or the
 * parser's refusal, word for word. A config Warren generated (the agent's, derived from the node's
 * primary) also keeps its range pools, to be matched against the one the agent knows node-local.
 * A file that is not JSON cannot be said to name Warren or not: it is listed apart, with whether
 * its text mentions "warren" at all.
 *
 * Read-only and never throws; never blocks on a file (a FIFO) nor reads one without bound.
 */
import { readdirSync } from 'node:fs';
import { readRegularFile, unreadReason } from '../../core/bounded-read.ts';
import { join } from 'node:path';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { MAX_CONFIG_BYTES } from '../../api/limits.ts';
import { isPlainObject } from '../../core/validate.ts';
import { GENERATED_MARKER, isConfigName } from '../../cni/derived-config.ts';
import type { IgnoredKey } from '../../cni/ipam-config.ts';
import { parseNetConf } from '../../cni/netconf.ts';
import type { StoreKind } from '../../store/store.ts';
import { isMultusConfigText } from '../../cni/multus.ts';

/** What a config that names Warren asks of the agent, or why the agent would refuse it. */
export type WarrenConfigReading =
  | {
      readonly kind: 'parsed';
      readonly network: string;
      readonly socket?: string;
      readonly journalDir?: string;
      readonly store?: StoreKind;
      /** Marked `"node_local": true`. */
      readonly nodeLocal?: true;
      /** The range pools of a config Warren generated (see the module header). */
      readonly pools?: readonly string[];
      /** The WarrenPools the config names (`ipam.pools`), when it names them. */
      readonly warrenPools?: readonly string[];
      readonly ignoredKeys: readonly IgnoredKey[];
    }
  | { readonly kind: 'refused'; readonly message: string };

export interface WarrenConfig {
  readonly file: string;
  /** In a list: the index of the plugin whose ipam is Warren's. */
  readonly plugin?: number;
  readonly reading: WarrenConfigReading;
}

export interface MalformedConfig {
  readonly file: string;
  readonly reason: string;
  /** Its text mentions "warren": it may well have been meant for Warren. */
  readonly mentionsWarren: boolean;
}

export type ConfDirListing =
  | { readonly kind: 'listed' }
  | { readonly kind: 'missing' }
  | { readonly kind: 'unreadable'; readonly reason: string };

export interface ConfDirScan {
  readonly dir: string;
  readonly listing: ConfDirListing;
  readonly configs: readonly WarrenConfig[];
  readonly malformed: readonly MalformedConfig[];
  /** Config files that name no Warren plugin. */
  readonly others: readonly string[];
  /** The first of them that is Multus' own config, when there is one: Warren's configs are its attachments'. */
  readonly multus?: string;
}

function namesWarren(plugin: unknown): boolean {
  return isPlainObject(plugin) && isPlainObject(plugin.ipam) && plugin.ipam.type === 'warren';
}

/**
 * The agent's parse of one network config (an ADD's), as what it asks or the refusal; with its
 * range pools when Warren generated it.
 */
export function readWarrenConfig(raw: unknown, generated = false): WarrenConfigReading {
  try {
    const conf = parseNetConf(raw, 'ADD');
    const { socket, journalDir, store, nodeLocal, ignoredKeys } = conf.ipam;
    return {
      kind: 'parsed',
      network: conf.name,
      ...defined({ socket, journalDir, store, nodeLocal }),
      ...(generated ? { pools: conf.ipam.ranges.map((range) => range.pool) } : {}),
      ...defined({ warrenPools: conf.ipam.pools }),
      ignoredKeys,
    };
  } catch (error) {
    return { kind: 'refused', message: messageOf(error) };
  }
}

/** The configs of one file's text that name Warren; throws (a message) when it is not a config at all. */
export function warrenConfigsOf(file: string, text: string): WarrenConfig[] {
  const value: unknown = JSON.parse(text);
  if (!isPlainObject(value)) throw new Error('not a JSON object');
  const generated = value[GENERATED_MARKER] !== undefined;
  if (Array.isArray(value.plugins)) {
    return value.plugins.flatMap((plugin, index) =>
      namesWarren(plugin)
        ? [
            {
              file,
              plugin: index,
              reading: readWarrenConfig(
                { ...(plugin as object), cniVersion: value.cniVersion, name: value.name },
                generated,
              ),
            },
          ]
        : [],
    );
  }
  return namesWarren(value) ? [{ file, reading: readWarrenConfig(value) }] : [];
}

/** Every config file of `dir`, in the runtime's order; see the module header. */
export function scanConfDir(dir: string): ConfDirScan {
  let names: string[];
  try {
    names = readdirSync(dir).filter(isConfigName).sort();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const listing: ConfDirListing =
      code === 'ENOENT' ? { kind: 'missing' } : { kind: 'unreadable', reason: messageOf(error) };
    return { dir, listing, configs: [], malformed: [], others: [] };
  }
  const configs: WarrenConfig[] = [];
  const malformed: MalformedConfig[] = [];
  const others: string[] = [];
  let multus: string | undefined;
  for (const name of names) {
    const file = join(dir, name);
    let text: string;
    try {
      // Never blocks (a FIFO) nor reads without bound (a link to /dev/zero): core/bounded-read.ts.
      const read = readRegularFile(file, MAX_CONFIG_BYTES);
      if (read.kind === 'missing') continue; // removed since the listing
      if (read.kind === 'not-regular' && read.what === 'a directory') continue; // the runtime skips it too
      if (read.kind !== 'read') {
        malformed.push({ file, reason: unreadReason(read) ?? '', mentionsWarren: false });
        continue;
      }
      text = read.text;
    } catch (error) {
      malformed.push({ file, reason: `cannot be read: ${messageOf(error)}`, mentionsWarren: false });
      continue;
    }
    try {
      const found = warrenConfigsOf(file, text);
      if (found.length === 0) others.push(file);
      if (found.length === 0 && multus === undefined && isMultusConfigText(text)) multus = file;
      configs.push(...found);
    } catch (error) {
      malformed.push({
        file,
        reason: `is not a network config: ${messageOf(error)}`,
        mentionsWarren: /warren/i.test(text),
      });
    }
  }
  return { dir, listing: { kind: 'listed' }, configs, malformed, others, ...defined({ multus }) };
}
