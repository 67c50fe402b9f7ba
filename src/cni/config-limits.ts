/**
 * How large and how deep a network config may be: what the plugin reads, what the agent accepts,
 * and what the config manager writes (a derived config the plugin would refuse is never written).
 * Re-exported by api/limits.ts, the wire contract between plugin and agent; kept in the cni layer
 * because the config derivation (cni/derived-config.ts) holds a primary to the same limits.
 */

/**
 * The largest network config the plugin reads from stdin. Network configs are small. The plugin
 * forwards the config as it read it, so it stays this size: runtimes write valid UTF-8 (Go's JSON
 * encoder writes nothing else), and only invalid bytes would grow, replaced by U+FFFD.
 */
export const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

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
