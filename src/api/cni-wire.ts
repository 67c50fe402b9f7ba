/**
 * The CNI call on the wire, defined once: the request a caller (the TypeScript plugin, the native
 * forwarder) sends the agent, the answer the agent gives a forwarded call, and the limits of both.
 * Every codec of it is this file or checked against it:
 * - the plugin's request (cni-call.ts `cniRequestText`) is `cniRequestBody` below;
 * - the agent takes it apart (forwarded-call.ts `splitCniRequest`) and checks its fields
 *   (server/cni-service.ts) by `ENVELOPE` and `CONFIG_FIELD`;
 * - the agent's answer to a forwarded call is `forwardedAnswerHeaders`/`forwardedAnswerBody`;
 * - the forwarder (C, src/plugin/forwarder/agent-exchange.c) is checked against the vectors this
 *   file generates (test/fixtures/cni-wire-vectors.txt): its request bytes, how it reads each
 *   answer, and its compiled-in limits. A test fails when the file and this definition drift.
 *
 * The request: `POST /v1/cni`, a JSON object whose fields are the CNI variables as strings, in
 * `ENVELOPE`'s order (command and args always, args "" when unset; the others when set), escaped as
 * JSON.stringify escapes, then `"config":` and the config's bytes exactly as the runtime wrote
 * them, then `}`. The config is the last field and is never encoded again: the receiver parses it
 * on its own. A forwarder marks its request `X-Warren-Answer: stdout` (ANSWER_HEADER).
 *
 * The answer to a forwarded call is always status 200, and either the plugin's stdout as the body
 * with its exit code (EXIT_HEADER), or FALLBACK_HEADER with a reason and no body: the TypeScript
 * plugin must run the call. A forwarder prints an answer only when its head is status 200 with CRLF
 * line ends, exactly one Content-Length (at most MAX_ANSWER_BODY_BYTES), exactly one X-Warren-Exit
 * (0..MAX_EXIT_CODE, digits only), no X-Warren-Fallback and no Transfer-Encoding, within
 * MAX_ANSWER_HEAD_BYTES, and its body arrives whole; header names in any case. Anything else hands
 * the call to the plugin. Bytes past the declared body are not the answer.
 *
 * A file of its own on the plugin's path: the plugin's encoder is this definition, not a copy.
 */
import { AGENT_ANSWER_TIMEOUT_MS, MAX_CONFIG_BYTES } from './limits.ts';

export const CNI_PATH = '/v1/cni';

/** Request header asking POST /v1/cni to answer as stdout; its one value is `stdout`. */
export const ANSWER_HEADER = 'x-warren-answer';
/** Answer header: the exit code, with the body exactly the stdout. */
export const EXIT_HEADER = 'x-warren-exit';
/** Answer header: the TypeScript plugin must run this call itself, and why (a `FallbackReason`). */
export const FALLBACK_HEADER = 'x-warren-fallback';

/**
 * The envelope's fields in the order they are written, each with the CNI variable it carries.
 * `always`: written when the variable is unset too (command: a caller never sends without one;
 * args: as "").
 */
export const ENVELOPE = [
  { field: 'command', variable: 'CNI_COMMAND', always: true },
  { field: 'args', variable: 'CNI_ARGS', always: true },
  { field: 'containerID', variable: 'CNI_CONTAINERID', always: false },
  { field: 'netns', variable: 'CNI_NETNS', always: false },
  { field: 'ifname', variable: 'CNI_IFNAME', always: false },
] as const;

export type EnvelopeField = (typeof ENVELOPE)[number]['field'];

/** The last field: the config's bytes, verbatim. */
export const CONFIG_FIELD = 'config';

/** The CNI variables a request carries, by field; unset ones undefined. */
export type WireVariables = { readonly command: string } & {
  readonly [F in Exclude<EnvelopeField, 'command'>]?: string | undefined;
};

/**
 * Linux's MAX_ARG_STRLEN: no environment string can be longer, so neither can a variable a
 * forwarder relays. Past it a forwarder hands the call to the plugin instead of sending it.
 */
export const MAX_VARIABLE_BYTES = 128 * 1024;
/** The most a forwarder reads of an answer's head; a longer head is not an answer to print. */
export const MAX_ANSWER_HEAD_BYTES = 64 * 1024;
/** The largest answer body (Content-Length) a forwarder reads. */
export const MAX_ANSWER_BODY_BYTES = 64 * 1024 * 1024;
/** The largest X-Warren-Exit: an exit status. */
export const MAX_EXIT_CODE = 255;

/** Every limit of the wire by the name the vector file gives it, for the forwarder to be held to. */
export const WIRE_LIMITS: Readonly<Record<string, number>> = {
  'max-config-bytes': MAX_CONFIG_BYTES,
  'max-variable-bytes': MAX_VARIABLE_BYTES,
  'max-answer-head-bytes': MAX_ANSWER_HEAD_BYTES,
  'max-answer-body-bytes': MAX_ANSWER_BODY_BYTES,
  'max-exit-code': MAX_EXIT_CODE,
  'answer-timeout-ms': AGENT_ANSWER_TIMEOUT_MS,
};

/** Everything of the body before the config's bytes: `{` the variables, `,"config":`. */
export function envelopeText(vars: WireVariables): string {
  const envelope: Record<string, string> = {};
  for (const { field, always } of ENVELOPE) {
    const value = vars[field];
    if (value !== undefined) envelope[field] = value;
    else if (always) envelope[field] = '';
  }
  return `${JSON.stringify(envelope).slice(0, -1)},"${CONFIG_FIELD}":`;
}

/** The request's body as text, with `configText` spliced in as it is. */
export function cniRequestBody(vars: WireVariables, configText: string): string {
  return `${envelopeText(vars)}${configText}}`;
}

/**
 * What a forwarder sends for the CNI variables `variables` (by name, as in its environment) and the
 * config's bytes: head and body; undefined when it sends nothing and hands the call to the plugin
 * (CNI_COMMAND unset, or a variable longer than MAX_VARIABLE_BYTES).
 */
export function forwardedRequest(
  variables: Readonly<Record<string, string | undefined>>,
  config: Buffer,
): Buffer | undefined {
  const command = variables.CNI_COMMAND;
  if (command === undefined) return undefined;
  const vars: Record<string, string | undefined> = {};
  for (const { field, variable } of ENVELOPE) {
    const value = variables[variable];
    if (value !== undefined && Buffer.byteLength(value) > MAX_VARIABLE_BYTES) return undefined;
    vars[field] = value;
  }
  const body = Buffer.concat([Buffer.from(envelopeText({ ...vars, command })), config, Buffer.from('}')]);
  return Buffer.concat([Buffer.from(forwardedRequestHead(body.length)), body]);
}

/** The head a forwarder sends before a body of `bodyLength` bytes. */
export function forwardedRequestHead(bodyLength: number): string {
  return (
    `POST ${CNI_PATH} HTTP/1.1\r\nHost: warren\r\nConnection: close\r\nContent-Type: application/json\r\n` +
    `X-Warren-Answer: stdout\r\nContent-Length: ${bodyLength}\r\n\r\n`
  );
}

/**
 * Why a call is the TypeScript plugin's to answer, on the wire as a short token:
 * - `del-not-committed`: a DEL the agent took and could not commit: the plugin journals it.
 * - `no-command`: no CNI_COMMAND; without one the executable may be the command line.
 * - `unreadable-request`: the body is not the plugin's request (envelope fields, then the config).
 * - `request-too-large`: the body is past the agent's limit.
 * - `config-too-large`: the config is past the plugin's stdin limit, which the plugin refuses.
 * - `config-too-deep`: the config nests deeper than MAX_CONFIG_DEPTH, which the plugin refuses or
 *   journals before anything walks it.
 * - `config-not-json`: the config does not parse on its own; the plugin names the decode failure.
 * - `agent-failure`: the agent failed to answer (a bug); the plugin asks again the usual way.
 */
export type FallbackReason =
  | 'del-not-committed'
  | 'no-command'
  | 'unreadable-request'
  | 'request-too-large'
  | 'config-too-large'
  | 'config-too-deep'
  | 'config-not-json'
  | 'agent-failure';

/** What the plugin writes to stdout, and its exit code. */
export interface PrintAnswer {
  readonly kind: 'print';
  readonly stdout: string;
  readonly exitCode: 0 | 1;
}

/** The TypeScript plugin must run the call itself. */
export interface PluginAnswer {
  readonly kind: 'plugin';
  readonly reason: FallbackReason;
  /** What the plugin records as the reason (the agent's message), for a journaled DEL. */
  readonly why: string;
}

export type StdoutAnswer = PrintAnswer | PluginAnswer;

/** The headers of the agent's answer (status 200) to a forwarded call. */
export function forwardedAnswerHeaders(answer: StdoutAnswer): Record<string, string> {
  switch (answer.kind) {
    case 'print':
      return {
        [EXIT_HEADER]: String(answer.exitCode),
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(answer.stdout)),
      };
    case 'plugin':
      return { [FALLBACK_HEADER]: answer.reason, 'content-length': '0' };
    default: {
      const never: never = answer;
      throw new Error(`unhandled stdout answer ${JSON.stringify(never)}`);
    }
  }
}

/** The body of the agent's answer to a forwarded call: the stdout to print, or nothing. */
export function forwardedAnswerBody(answer: StdoutAnswer): string {
  return answer.kind === 'print' ? answer.stdout : '';
}
