/**
 * The CNI call on its own: the one route on the hot path of every pod start. The plugin imports
 * this and nothing else of the API, so its bundle carries no more than one request and the error
 * table; the full client (client.ts) builds on it.
 *
 * Resolves with the agent's CNI outcome. Rejects with AGENT_UNREACHABLE when the agent cannot be
 * reached, IO_FAILURE when it answers something that is not an outcome, and the agent's own code
 * when it refuses the request itself (a body too large, not JSON).
 */
import { WarrenError } from '../core/errors.ts';
import { requestJson } from '../core/unix-http.ts';
import { errorFromAnswer } from './errors.ts';
import type { CniOutcome } from './protocol.ts';

export const CNI_PATH = '/v1/cni';

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
  const peer = `Warren agent at ${options.socket}`;
  const response = await requestJson({
    socket: options.socket,
    method: 'POST',
    path: CNI_PATH,
    bodyText: options.bodyText,
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
  });
  if (response.status !== 200) throw errorFromAnswer(response.status, response.body, peer);
  const outcome = response.body as CniOutcome | undefined;
  if (typeof outcome !== 'object' || outcome === null) throw new WarrenError('IO_FAILURE', `${peer} answered HTTP 200 without a CNI outcome`);
  switch (outcome.kind) {
    case 'result':
    case 'error':
      if (typeof outcome.output !== 'object' || outcome.output === null) throw new WarrenError('IO_FAILURE', `${peer} answered a CNI ${outcome.kind} without output`);
      return outcome;
    case 'silent':
      return outcome;
    default: {
      const never: never = outcome;
      throw new WarrenError('IO_FAILURE', `${peer} answered an unknown outcome ${JSON.stringify((never as { kind?: unknown }).kind)}`);
    }
  }
}
