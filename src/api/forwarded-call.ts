/**
 * A CNI call relayed by the native forwarder, answered as the TypeScript plugin's stdout. The
 * forwarder knows the wire and not the spec: it sends the plugin's request (cni-wire.ts, the one
 * definition: the CNI variables, then `"config":` and the stdin bytes verbatim) with
 * `X-Warren-Answer: stdout`, and prints what it gets back. The agent answers either the exact
 * bytes and exit code the plugin would print for the same call, or that the plugin must run the
 * call itself (the forwarder then execs it with the same environment and stdin).
 *
 * Guarantees, checked step by step in the plugin's own order (plugin.ts `runPlugin`):
 * 1. The variables are checked first, as the plugin checks its environment before it reads stdin:
 *    bad ones are printed as the plugin prints them (CNI 4, in the spec's version, whatever the
 *    config says). No CNI_COMMAND at all is the plugin's: without one it may be the command line.
 * 2. A config past the plugin's stdin limit, nested past MAX_CONFIG_DEPTH, or that does not parse
 *    as JSON on its own is the plugin's (it refuses or journals it with its own messages).
 *    VERSION is answered before the config is looked at, as the plugin does.
 * 3. The outcome is printed by the one rule of cni-stdout.ts, which is the plugin's rule.
 * Anything that is not the plugin's request, byte for byte in shape (a field that is not a string,
 * an unknown or repeated field, a config not last), is the plugin's: never a guess. The config is
 * parsed on its own, never as part of the body, so text after it cannot reach the envelope.
 */
import { MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, nestsDeeperThan } from './limits.ts';
import { type CniVariables, checkCniVariables } from '../cni/args.ts';
import { SPEC_VERSION } from '../cni/spec.ts';
import { type FallbackReason, type StdoutAnswer, failureStdout, stdoutOf } from './cni-stdout.ts';
import { CONFIG_FIELD, ENVELOPE } from './cni-wire.ts';
import type { AgentApi } from './protocol.ts';

/** The request's body taken apart: the envelope's fields, and the config's bytes as the runtime wrote them. */
export interface SplitCniRequest {
  readonly fields: CniVariables;
  readonly config: Buffer;
}

const ENVELOPE_FIELDS: ReadonlySet<string> = new Set(ENVELOPE.map((f) => f.field));

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;

/**
 * Splits the plugin's request: `{` then string fields, then `"config":` and the config's bytes up
 * to the body's last byte, `}`. Undefined for anything else. Works on bytes, so the config's size
 * is its size on stdin.
 */
export function splitCniRequest(body: Buffer): SplitCniRequest | undefined {
  let i = skipSpace(body, 0);
  if (body[i] !== OPEN_BRACE) return undefined;
  i += 1;
  const fields: Record<string, string> = {};
  for (;;) {
    const key = stringAt(body, skipSpace(body, i));
    if (key === undefined) return undefined;
    i = skipSpace(body, key.end);
    if (body[i] !== COLON) return undefined;
    i += 1;
    if (key.value === CONFIG_FIELD) {
      // The config runs to the closing brace: the caller wrote the stdin bytes there verbatim.
      if (body.length <= i || body[body.length - 1] !== CLOSE_BRACE) return undefined;
      return { fields, config: body.subarray(i, body.length - 1) };
    }
    if (!ENVELOPE_FIELDS.has(key.value) || Object.hasOwn(fields, key.value)) return undefined;
    const value = stringAt(body, skipSpace(body, i));
    if (value === undefined) return undefined;
    fields[key.value] = value.value;
    i = skipSpace(body, value.end);
    if (body[i] !== COMMA) return undefined;
    i += 1;
  }
}

/** The JSON string starting at `start`, decoded, and where it ends; undefined if there is none. */
function stringAt(body: Buffer, start: number): { value: string; end: number } | undefined {
  if (body[start] !== QUOTE) return undefined;
  for (let i = start + 1; i < body.length; i++) {
    const c = body[i];
    if (c === BACKSLASH) {
      i += 1;
    } else if (c === QUOTE) {
      let value: unknown;
      try {
        value = JSON.parse(body.toString('utf8', start, i + 1));
      } catch {
        return undefined;
      }
      return typeof value === 'string' ? { value, end: i + 1 } : undefined;
    }
  }
  return undefined;
}

function skipSpace(body: Buffer, start: number): number {
  let i = start;
  while (body[i] === 0x20 || body[i] === 0x09 || body[i] === 0x0a || body[i] === 0x0d) i += 1;
  return i;
}

function pluginRuns(reason: FallbackReason, why: string): StdoutAnswer {
  return { kind: 'plugin', reason, why };
}

/**
 * The forwarded call `body`, run against `api` and answered as the plugin's stdout. Resolves for
 * every body; rejects only if `api.cni` does (the agent's CNI service never does).
 */
export async function answerForwardedCall(api: Pick<AgentApi, 'cni'>, body: Buffer): Promise<StdoutAnswer> {
  const split = splitCniRequest(body);
  if (split === undefined) return pluginRuns('unreadable-request', 'the body is not a CNI call as the plugin sends it');
  const { fields, config } = split;
  if (fields.command === undefined || fields.command === '') return pluginRuns('no-command', 'CNI_COMMAND is not set');
  let command: string;
  try {
    command = checkCniVariables(fields).command;
  } catch (badEnv) {
    // The plugin checks its environment before it reads stdin, so before it knows a cniVersion.
    return failureStdout(badEnv, SPEC_VERSION);
  }
  if (config.length > MAX_CONFIG_BYTES)
    return pluginRuns('config-too-large', `the config is larger than ${MAX_CONFIG_BYTES} bytes`);
  const request = { ...fields, command };
  if (command === 'VERSION') return stdoutOf(command, await api.cni({ ...request, config: null }));
  const text = config.toString('utf8');
  if (nestsDeeperThan(text, MAX_CONFIG_DEPTH))
    return pluginRuns('config-too-deep', `the config nests more than ${MAX_CONFIG_DEPTH} levels deep`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return pluginRuns('config-not-json', 'the config is not valid JSON');
  }
  return stdoutOf(command, await api.cni({ ...request, config: parsed }));
}
