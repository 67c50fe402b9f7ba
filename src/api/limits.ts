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
