/**
 * JSON over HTTP/1.1 on a unix socket. Every error message starts with the caller's name for the
 * peer, which names the socket; a transport failure carries the caller's code for "unreachable"
 * and names the system error, so "the peer is down" is never confused with "the peer said no"; an
 * answer that is not HTTP with a JSON body is IO_FAILURE. Every failure, a body that cannot be
 * written as JSON included, is a rejected promise, never a throw. An answer is bounded: a head
 * past MAX_HEAD_BYTES or an answer past maxResponseBytes is refused as it arrives, not held.
 *
 * Hand-written on node:net rather than node:http for cold starts: a process that makes one
 * request and exits (a CNI plugin, once per pod start) would pay several milliseconds for
 * node:http's client, agent and parser, for one request whose answer always carries
 * Content-Length. One request per connection.
 */
import { WarrenError } from './errors.ts';

/** Who answers on the socket, in the caller's words. */
export interface Peer {
  /** Starts every error message: "<label> is not reachable (ENOENT)". */
  readonly label: string;
  /** The code of a transport failure: not reachable, no answer in time, connection dropped or cut short. */
  readonly unreachableCode: string;
  /**
   * The Host header (HTTP/1.1 requires one; on a unix socket it names no address, only whom the
   * caller means). Default "localhost", as curl --unix-socket sends.
   */
  readonly host?: string;
}

export interface JsonResponse {
  readonly status: number;
  readonly body: unknown;
}

export interface JsonRequest {
  readonly socket: string;
  /** Default: "peer at <socket>", unreachable as IO_FAILURE, Host localhost. */
  readonly peer?: Peer;
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly body?: unknown;
  /** The body already serialized as JSON, sent as it is instead of `body`. */
  readonly bodyText?: string;
  /** Milliseconds before the call is abandoned. */
  readonly timeoutMs?: number;
  /** Largest answer accepted, head and body; default MAX_RESPONSE_BYTES. */
  readonly maxResponseBytes?: number;
}

/** The default bound on an answer, head and body: far past any answer of a local JSON API. */
export const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
/** A status line and headers larger than this are refused (a JSON API's are ~100 bytes). */
export const MAX_HEAD_BYTES = 64 * 1024;

const net = (): typeof import('node:net') => process.getBuiltinModule('node:net') as typeof import('node:net');

interface ResponseHead {
  readonly status: number;
  /** Content-Length; undefined when absent (the body runs to the end of the connection). */
  readonly length: number | undefined;
  /** Where the body starts in the buffer the head was parsed from. */
  readonly bodyStart: number;
}

/** Parses a complete HTTP/1.1 response head; undefined while more bytes are needed. */
export function parseResponseHead(buffer: Buffer): ResponseHead | undefined {
  const end = buffer.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const lines = buffer.subarray(0, end).toString('latin1').split('\r\n');
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (match === null) throw new Error(`malformed status line "${(lines[0] ?? '').slice(0, 60)}"`);
  let length: number | undefined;
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'content-length') {
      const value = line.slice(colon + 1).trim();
      length = Number(value);
      // Digits only: Number() would also take "1e3", "0x10" and " ".
      if (!/^\d+$/.test(value) || !Number.isSafeInteger(length)) throw new Error(`malformed Content-Length "${value}"`);
    }
  }
  return { status: Number(match[1]), length, bodyStart: end + 4 };
}

export function requestJson(options: JsonRequest): Promise<JsonResponse> {
  const peer = options.peer ?? { label: `peer at ${options.socket}`, unreachableCode: 'IO_FAILURE' };
  let payload: string | undefined;
  try {
    payload = options.bodyText ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  } catch (error) {
    // A body nested too deep (RangeError) or holding a BigInt: the caller's mistake, reported as
    // a failed call rather than thrown past the promise.
    return Promise.reject(
      new WarrenError('IO_FAILURE', `request to ${peer.label} cannot be written as JSON: ${(error as Error).message}`, {
        cause: error,
      }),
    );
  }
  const timeoutMs = options.timeoutMs ?? 120_000;
  const maxBytes = options.maxResponseBytes ?? MAX_RESPONSE_BYTES;
  return new Promise((resolve, reject) => {
    let connected = false;
    let settled = false;
    /** Bytes until the head is complete (bounded by MAX_HEAD_BYTES and one chunk). */
    let pending: Buffer = Buffer.alloc(0);
    let head: ResponseHead | undefined;
    /** Body bytes, kept as chunks and joined once: no copy of the whole per chunk received. */
    const body: Buffer[] = [];
    let bodyBytes = 0;
    let received = 0;
    const unreachable = (why: string, cause?: unknown): WarrenError =>
      new WarrenError(peer.unreachableCode, `${peer.label} ${why}`, cause === undefined ? {} : { cause });
    const malformed = (why: string, cause?: unknown): WarrenError =>
      new WarrenError('IO_FAILURE', `${peer.label} ${why}`, cause === undefined ? {} : { cause });
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
    /** Takes the head out of `pending` once it is all there; false while more is needed. */
    const readHead = (): boolean => {
      try {
        head = parseResponseHead(pending);
      } catch (error) {
        finish(malformed(`answered malformed HTTP: ${(error as Error).message}`));
        return false;
      }
      const headBytes = head === undefined ? pending.length : head.bodyStart;
      if (headBytes > MAX_HEAD_BYTES) {
        finish(malformed(`answered an HTTP head larger than ${MAX_HEAD_BYTES} bytes`));
        return false;
      }
      if (head === undefined) return false;
      if (head.length !== undefined && head.bodyStart + head.length > maxBytes) {
        finish(malformed(`announced an answer of ${head.length} bytes, more than ${maxBytes}`));
        return false;
      }
      const rest = pending.subarray(head.bodyStart);
      if (rest.length > 0) {
        body.push(rest);
        bodyBytes += rest.length;
      }
      pending = Buffer.alloc(0);
      return true;
    };
    /** Resolves once the whole body is in; returns false while more is needed. */
    const tryComplete = (ended: boolean): boolean => {
      if (head === undefined) return false;
      if (head.length !== undefined ? bodyBytes < head.length : !ended) return false;
      const text = Buffer.concat(body, bodyBytes)
        .subarray(0, head.length ?? bodyBytes)
        .toString('utf8');
      try {
        finish(undefined, { status: head.status, body: text === '' ? undefined : JSON.parse(text) });
      } catch (error) {
        finish(malformed('answered with invalid JSON', error));
      }
      return true;
    };
    socket.on('connect', () => {
      connected = true;
      const requestHead =
        `${options.method} ${options.path} HTTP/1.1\r\nHost: ${peer.host ?? 'localhost'}\r\nConnection: close\r\n` +
        (payload === undefined
          ? ''
          : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n`) +
        '\r\n';
      // Not end(): Node's HTTP server drops a connection whose client half-closes before the
      // answer is ready, and answers that wait on a remote store are not ready at once.
      socket.write(requestHead + (payload ?? ''));
    });
    socket.on('data', (chunk: Buffer) => {
      if (settled) return;
      received += chunk.length;
      if (received > maxBytes) return finish(malformed(`answered more than ${maxBytes} bytes`));
      if (head === undefined) {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        if (!readHead()) return;
      } else {
        body.push(chunk);
        bodyBytes += chunk.length;
      }
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
