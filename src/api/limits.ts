/**
 * How much input Warren accepts, in one place so the plugin and the agent cannot disagree: a
 * config the plugin reads whole always fits in the request the agent reads. Past these limits input
 * is refused with an error naming the limit, never half-read or crashed on. Part of the wire
 * contract between the plugin (and the native forwarder, which repeats MAX_CONFIG_BYTES) and the
 * agent, so it lives with the contract.
 */

// The config's own limits live with the network config (cni/config-limits.ts), where the config
// manager also holds a primary to them; they are part of this contract all the same.
export { MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, nestsDeeperThan } from '../cni/config-limits.ts';
import { MAX_CONFIG_BYTES } from '../cni/config-limits.ts';

/**
 * Room for what the plugin sends beside the config: the CNI variables. Each variable is at most
 * 128 KiB (Linux's MAX_ARG_STRLEN) and at most six times that once JSON-escaped (`\u001b`);
 * only CNI_NETNS and CNI_ARGS are unbounded otherwise, so 2 MiB holds the worst case.
 */
export const MAX_ENVELOPE_BYTES = 2 * 1024 * 1024;

/** The agent's request body limit: a config at the plugin's limit, with its envelope, fits. */
export const MAX_REQUEST_BYTES = MAX_CONFIG_BYTES + MAX_ENVELOPE_BYTES;
