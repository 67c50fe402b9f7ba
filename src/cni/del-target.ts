/**
 * What a DEL needs of a network config that cannot be validated whole (invalid, or nested too
 * deep to walk), read leniently, in one place for the agent (which releases by it) and the plugin
 * (which journals by it). A DEL must not fail on a config it does not need: a runtime retries a
 * failed DEL for ever, and the address stays held meanwhile (seen through Multus with a broken
 * NetworkAttachmentDefinition).
 *
 * A DEL releases what its attachment holds: the owner (network name, container ID, interface).
 * The container ID and the interface come from the environment and are checked as for any call;
 * of the config exactly these are read, at its top level and in `ipam`, and nothing else walked:
 * - `name`, the network: a string that is a valid network name (cni/args.ts), or the DEL is refused
 *   (7): without it nothing says which network's allocation is the container's, and releasing by
 *   container and interface alone could release another network's (an interface name reused);
 * - `ipam.journal_dir` (the plugin's journal): absent, or an absolute path, else refused (7): a
 *   DEL written anywhere else would never be found by the agent;
 * - `ipam.cooldown_seconds`, when it is what the full parser accepts; else the release rests for
 *   the pool's default, as a journaled DEL does.
 * Everything else (ranges, pools, store, every other key) is ignored: the release finds the
 * owner's allocations in the store by owner, in whichever pools they are, so nothing of another
 * network is touched.
 */
import { isPlainObject } from '../core/validate.ts';
import { isValidNetworkName, printable } from './args.ts';
import { isCooldownSeconds } from './config-values.ts';
import { WarrenError } from '../core/errors.ts';

/** A DEL's target read from a config that does not validate (see the module header). */
export interface DelTarget {
  readonly network: string;
  /** `ipam.journal_dir`, when it names one. */
  readonly journalDir: string | undefined;
  /** `ipam.cooldown_seconds`, when valid. */
  readonly cooldownSeconds: number | undefined;
}

/**
 * The DEL target of `config`, read leniently; `problem` is what is wrong with the config as a whole,
 * said in the refusal (INVALID_CONFIG) when not even the target can be read.
 */
export function delTargetOf(config: unknown, problem: string): DelTarget {
  const top: { name?: unknown; ipam?: unknown } = isPlainObject(config) ? config : {};
  if (typeof top.name !== 'string' || !isValidNetworkName(top.name)) {
    // Not String(top.name): on a deeply nested array that recurses too.
    const what =
      top.name === undefined
        ? 'is missing'
        : typeof top.name === 'string'
          ? `"${printable(top.name)}" is not a network name`
          : 'is not a string';
    throw new WarrenError('INVALID_CONFIG', `${problem}, and its name ${what}: the DEL cannot be recorded`);
  }
  const ipam: { journal_dir?: unknown; cooldown_seconds?: unknown } = isPlainObject(top.ipam) ? top.ipam : {};
  const journalDir = ipam.journal_dir;
  if (journalDir !== undefined && !(typeof journalDir === 'string' && journalDir.startsWith('/'))) {
    throw new WarrenError(
      'INVALID_CONFIG',
      `${problem}, and ipam.journal_dir is not an absolute path: the DEL cannot be recorded`,
    );
  }
  const cooldownSeconds = isCooldownSeconds(ipam.cooldown_seconds) ? ipam.cooldown_seconds : undefined;
  return { network: top.name, journalDir, cooldownSeconds };
}
