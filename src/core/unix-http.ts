/**
 * JSON over HTTP/1.1 on a unix socket: the one way the plugin and the CLI talk to the agent.
 * Transport failures become AGENT_UNREACHABLE with the socket path and the system error named, so
 * "the agent is down" is never confused with "the agent said no". Every failure, a body that
 * cannot be written as JSON included, is a rejected promise, never a throw.
 *
 * Hand-written on node:net rather than node:http: the plugin runs once per pod start, and
 * node:http's client, agent and parser cost several milliseconds of every cold start for one
 * request whose answer always carries Content-Length. One request per connection.
 */
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
  /** The body already serialized as JSON, sent as it is instead of `body`. */
  readonly bodyText?: string;
  /** Milliseconds before the call is abandoned. */
  readonly timeoutMs?: number;
}

/** Answers larger than this are not from the agent. */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

const net = (): typeof import('node:net') => process.getBuiltinModule('node:net') as typeof import('node:net');

/** Parses a complete HTTP/1.1 response head; undefined while more bytes are needed. */
export function parseResponseHead(buffer: Buffer): { status: number; length: number | undefined; bodyStart: number } | undefined {
  const end = buffer.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const lines = buffer.subarray(0, end).toString('latin1').split('\r\n');
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (match === null) throw new Error(`malformed status line "${(lines[0] ?? '').slice(0, 60)}"`);
  let length: number | undefined;
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'content-length') {
      length = Number(line.slice(colon + 1).trim());
      if (!Number.isSafeInteger(length) || length < 0) throw new Error(`malformed Content-Length "${line.slice(colon + 1).trim()}"`);
    }
  }
  return { status: Number(match[1]), length, bodyStart: end + 4 };
}

export function requestJson(options: JsonRequest): Promise<JsonResponse> {
  let payload: string | undefined;
  try {
    payload = options.bodyText ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  } catch (error) {
    // A body nested too deep (RangeError) or holding a BigInt: the caller's mistake, reported as
    // a failed call rather than thrown past the promise.
    return Promise.reject(new WarrenError('IO_FAILURE', `request to Warren agent at ${options.socket} cannot be written as JSON: ${(error as Error).message}`, { cause: error }));
  }
  const timeoutMs = options.timeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    let connected = false;
    let settled = false;
    let received: Buffer = Buffer.alloc(0);
    const unreachable = (why: string, cause?: unknown): WarrenError =>
      new WarrenError('AGENT_UNREACHABLE', `Warren agent at ${options.socket} ${why}`, cause === undefined ? {} : { cause });
    const finish = (error: Error | undefined, response?: JsonResponse): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error !== undefined) reject(error);
      else resolve(response as JsonResponse);
    };
    const socket = net().connect({ path: options.socket });
    const timer = setTimeout(() => finish(unreachable(`did not answer within ${timeoutMs} ms`)), timeoutMs);
    /** Resolves once the whole body is in; returns false while more is needed. */
    const tryComplete = (ended: boolean): boolean => {
      let head: ReturnType<typeof parseResponseHead>;
      try {
        head = parseResponseHead(received);
      } catch (error) {
        finish(new WarrenError('IO_FAILURE', `Warren agent at ${options.socket} answered malformed HTTP: ${(error as Error).message}`));
        return true;
      }
      if (head === undefined) return false;
      const available = received.length - head.bodyStart;
      if (head.length !== undefined ? available < head.length : !ended) return false;
      const text = received.subarray(head.bodyStart, head.bodyStart + (head.length ?? available)).toString('utf8');
      try {
        finish(undefined, { status: head.status, body: text === '' ? undefined : JSON.parse(text) });
      } catch (error) {
        finish(new WarrenError('IO_FAILURE', `Warren agent at ${options.socket} answered with invalid JSON`, { cause: error }));
      }
      return true;
    };
    socket.on('connect', () => {
      connected = true;
      const head =
        `${options.method} ${options.path} HTTP/1.1\r\nHost: warren\r\nConnection: close\r\n` +
        (payload === undefined ? '' : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n`) +
        '\r\n';
      // Not end(): Node's HTTP server drops a connection whose client half-closes before the
      // answer is ready, and answers that wait on a remote store are not ready at once.
      socket.write(head + (payload ?? ''));
    });
    socket.on('data', (chunk: Buffer) => {
      received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
      if (received.length > MAX_RESPONSE_BYTES) return finish(new WarrenError('IO_FAILURE', `Warren agent at ${options.socket} answered more than ${MAX_RESPONSE_BYTES} bytes`));
      tryComplete(false);
    });
    socket.on('end', () => {
      if (!tryComplete(true)) finish(unreachable('broke off its answer'));
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      const code = error.code ?? error.message;
      finish(unreachable(connected ? `dropped the connection (${code})` : `is not reachable (${code})`, error));
    });
    socket.on('close', () => {
      if (!settled && !tryComplete(true)) finish(unreachable('closed the connection without an answer'));
    });
  });
}
