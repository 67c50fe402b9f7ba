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

/**
 * How long a CNI call waits for the agent's answer (connecting, sending, answering together), in
 * the native forwarder (AGENT_EXCHANGE_TIMEOUT_MS in src/plugin/forwarder/agent-exchange.h, which
 * must be equal) and in the TypeScript plugin asking alone. A wedged agent (a socket that accepts
 * and never answers) costs a call this long, once: the forwarder that gave up tells the plugin so
 * (FORWARDER_TIMED_OUT_ENV), and the plugin answers without asking again.
 */
export const AGENT_ANSWER_TIMEOUT_MS = 30_000;

/**
 * Set by the native forwarder, to the milliseconds it waited, when it hands a call to the
 * TypeScript plugin because the agent did not answer within AGENT_ANSWER_TIMEOUT_MS. A wire fact
 * (no answer), not a CNI decision: the plugin journals a DEL, answers ADD 11, STATUS 50.
 */
export const FORWARDER_TIMED_OUT_ENV = 'WARREN_AGENT_TIMED_OUT_MS';

/**
 * What a DEL against a wedged agent may take, from the runtime's exec to its exit with the intent
 * journaled: half the kubelet's 2-minute runtime request timeout, so a loaded node (a slow start of
 * the fallback, a slow disk) still ends well inside it. ADD answers 11 within the same bound.
 */
export const DEL_BUDGET_MS = 60_000;
