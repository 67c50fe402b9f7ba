/**
 * How much input Warren accepts, in one place so the plugin and the agent cannot disagree: a
 * config the plugin reads whole always fits in the request the agent reads. Past these limits input
 * is refused with an error naming the limit, never half-read or crashed on. Part of the wire
 * contract between the plugin (and the native forwarder, which repeats MAX_CONFIG_BYTES) and the
 * agent, so it lives with the contract.
 */

/**
 * The largest network config the plugin reads from stdin. Network configs are small. The plugin
 * forwards the config as it read it, so it stays this size: runtimes write valid UTF-8 (Go's JSON
 * encoder writes nothing else), and only invalid bytes would grow, replaced by U+FFFD.
 */
export const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

/**
 * Room for what the plugin sends beside the config: the CNI variables. Each variable is at most
 * 128 KiB (Linux's MAX_ARG_STRLEN) and at most six times that once JSON-escaped (`\u001b`);
 * only CNI_NETNS and CNI_ARGS are unbounded otherwise, so 2 MiB holds the worst case.
 */
export const MAX_ENVELOPE_BYTES = 2 * 1024 * 1024;

/** The agent's request body limit: a config at the plugin's limit, with its envelope, fits. */
export const MAX_REQUEST_BYTES = MAX_CONFIG_BYTES + MAX_ENVELOPE_BYTES;

/**
 * Deepest nesting of arrays and objects a network config may have. Real configs nest a handful of
 * levels; code that walks a value recursively (JSON.stringify among it) overflows the stack a few
 * thousand levels down, so a config is refused well before that.
 */
export const MAX_CONFIG_DEPTH = 1000;

/**
 * Whether JSON text nests arrays and objects more than `max` levels deep. An iterative scan, so
 * it cannot overflow the stack however deep the text goes; it stops at the first level past `max`.
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  // Going past `max` takes more than `max` opening brackets: a typical config is not scanned.
  if (text.length <= max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > max) return true;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
  return false;
}

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
