/**
 * JSON over HTTP/1.1 on a unix socket: the one way the plugin and the CLI talk to the agent.
 * Transport failures become AGENT_UNREACHABLE with the socket path and the system error named, so
 * "the agent is down" is never confused with "the agent said no".
 */
import { request } from 'node:http';
import { WarrenError } from './errors.ts';

export interface JsonResponse {
  readonly status: number;
  readonly body: unknown;
}

export interface JsonRequest {
  readonly socket: string;
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly body?: unknown;
  /** Milliseconds before the call is abandoned. */
  readonly timeoutMs?: number;
}

export function requestJson(options: JsonRequest): Promise<JsonResponse> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    let sent = false;
    const unreachable = (why: string, cause?: unknown): WarrenError =>
      new WarrenError('AGENT_UNREACHABLE', `Warren agent at ${options.socket} ${why}`, cause === undefined ? {} : { cause });
    const req = request(
      {
        socketPath: options.socket,
        method: options.method,
        path: options.path,
        headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        timeout: options.timeoutMs ?? 120_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', (error) => reject(unreachable(`broke off its answer: ${error.message}`, error)));
        res.on('end', () => {
          if (!res.complete) return reject(unreachable('broke off its answer'));
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          try {
            body = text === '' ? undefined : JSON.parse(text);
          } catch (error) {
            return reject(new WarrenError('IO_FAILURE', `Warren agent at ${options.socket} answered with invalid JSON`, { cause: error }));
          }
          resolve({ status: res.statusCode ?? 0, body });
        });
      },
    );
    req.on('socket', (socket) => socket.on('connect', () => (sent = true)));
    req.on('timeout', () => req.destroy(unreachable(`did not answer within ${options.timeoutMs ?? 120_000} ms`)));
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error instanceof WarrenError) return reject(error);
      const code = error.code ?? error.message;
      reject(unreachable(sent ? `dropped the connection (${code})` : `is not reachable (${code})`, error));
    });
    req.end(payload);
  });
}
