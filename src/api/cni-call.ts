/**
 * The CNI call on its own: the one route on the hot path of every pod start. The plugin imports
 * this rather than the client, so its bundle carries one request, not every route; the full
 * client (client.ts) builds on it.
 *
 * Resolves with the agent's CNI outcome. Rejects with AGENT_UNREACHABLE when the agent cannot be
 * reached, IO_FAILURE when it answers something that is not an outcome, and the agent's own code
 * when it refuses the request itself (a body too large, not JSON).
 */
import { defined } from '../core/defined.ts';
import { WarrenError } from '../core/errors.ts';
import { printable } from '../cni/args.ts';
import { type Peer, requestJson } from '../core/unix-http.ts';
import { errorFromAnswer } from './errors.ts';
import { CNI_PATH, cniRequestBody } from './cni-wire.ts';
import type { CniEnv } from '../cni/args.ts';
import type { CniOutcome } from './protocol.ts';

/**
 * The agent as every client names it in errors ("Warren agent at <socket> is not reachable") and in
 * the Host header.
 */
export function agentPeer(socket: string): Peer {
  return { label: `Warren agent at ${socket}`, unreachableCode: 'AGENT_UNREACHABLE', host: 'warren' };
}

/**
 * The request's body: the CNI variables, and the config exactly as the runtime wrote it, last
 * (cni-wire.ts, the one definition of the request). The config is spliced in rather than encoded
 * again: it is known to parse, it keeps its size (the agent's body limit allows for it), and a pod
 * start does not pay for a second encoding. The native forwarder writes the same bytes (it cannot
 * parse the config either); the agent's forwarded-call.ts takes it apart again.
 */
export function cniRequestText(env: CniEnv, configText: string): string {
  return cniRequestBody(env, configText);
}

export interface CniCallOptions {
  readonly socket: string;
  /**
   * The request as JSON text (a `CniRequest`). Text, not a value: the plugin splices the config
   * in as the runtime wrote it instead of encoding it a second time.
   */
  readonly bodyText: string;
  readonly timeoutMs?: number;
}

export async function callCni(options: CniCallOptions): Promise<CniOutcome> {
  const agent = agentPeer(options.socket);
  const peer = agent.label;
  const response = await requestJson({
    socket: options.socket,
    peer: agent,
    method: 'POST',
    path: CNI_PATH,
    bodyText: options.bodyText,
    ...defined({ timeoutMs: options.timeoutMs }),
  });
  if (response.status !== 200) throw errorFromAnswer(response.status, response.body, peer);
  const outcome = response.body as CniOutcome | undefined;
  if (typeof outcome !== 'object' || outcome === null)
    throw new WarrenError('IO_FAILURE', `${peer} answered HTTP 200 without a CNI outcome`);
  switch (outcome.kind) {
    case 'result':
    case 'error':
      if (typeof outcome.output !== 'object' || outcome.output === null)
        throw new WarrenError('IO_FAILURE', `${peer} answered a CNI ${outcome.kind} without output`);
      return outcome;
    case 'silent':
      return outcome;
    default: {
      const never: never = outcome;
      throw new WarrenError('IO_FAILURE', `${peer} answered HTTP 200 with ${notAnOutcome(never)}`);
    }
  }
}

/** What a 200 answer holds instead of an outcome, in words and a bounded, printable excerpt. */
function notAnOutcome(body: unknown): string {
  const kind = (body as { kind?: unknown }).kind;
  let text: string;
  try {
    text = JSON.stringify(body) ?? String(body);
  } catch {
    text = '(not printable)';
  }
  const excerpt = printable(text.length > 200 ? `${text.slice(0, 200)}…` : text);
  if (typeof kind === 'string') return `an unknown outcome kind "${printable(kind.slice(0, 100))}": ${excerpt}`;
  return `a body that is not a CNI outcome (no "kind"): ${excerpt}`;
}
