/**
 * One exchange with the API server as it travels, whatever the transport: its answer's head and a
 * body read as it comes (`OpenedAnswer`), opened over HTTP/1.1 here (`openHttp1`) or over the shared
 * HTTP/2 session (http2-session.ts), then read whole and bounded (`readAll`) or line by line
 * (`readLines`, a watch). api-client.ts decides what is sent and what an answer means.
 *
 * Guarantees:
 * - `StaleConnection` is the one failure that says the server never handled the request, so it may
 *   be sent again: over HTTP/1.1, a reused keep-alive connection reset before any byte of the answer
 *   (the server had closed it idle); http2-session.ts says when over HTTP/2;
 * - a body cut off before its end (reset, destroyed, aborted) fails its reader; a body past its
 *   bound fails it too (`readAll`), or has its rest dropped where only its start is wanted;
 * - each line of a watch is handed on as it comes, none held after, multi-byte characters split
 *   between chunks kept whole.
 */
import { type Agent, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';

/** A failure the server provably never handled: the request may be sent again on a new connection. */
export class StaleConnection extends Error {}

/** An answer's head and its body, read as it comes. */
export interface OpenedAnswer {
  readonly status: number;
  readonly type: string;
  readonly body: Readable;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** One line of a stream as JSON, or the line itself when it is none. */
function parseLine(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return line;
  }
}

/** `promise`, or the signal's reason once it aborts first. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined); // its failure is no longer anyone's
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const aborted = (): void => reject(signal.reason);
    signal.addEventListener('abort', aborted, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', aborted));
  });
}

/** One HTTP/1.1 exchange on `agent`: StaleConnection for a reused connection the server had closed. */
export function openHttp1(
  url: URL,
  method: HttpMethod,
  headers: Record<string, string>,
  payload: Buffer | undefined,
  agent: Agent,
  signal: AbortSignal,
): Promise<OpenedAnswer> {
  const send = url.protocol === 'http:' ? httpRequest : httpsRequest;
  return new Promise((resolve, reject) => {
    let answered: Readable | undefined;
    // Not the request's own `signal` option: aborted while the last chunk of a kept-alive answer is
    // read (a watch stopped on its ERROR line, just as the server ends it), it destroys the socket
    // with the abort's error after the request let go of the socket's error listener, and the
    // process dies of an uncaught AbortError. An answer is ended by destroying its body instead
    // (its reader is told it was cut off), a request with no answer yet by destroying it.
    const aborted = (): void => {
      if (answered === undefined) req.destroy(signal.reason as Error);
      else answered.destroy();
    };
    const req = send(url, { method, headers, agent }, (res) => {
      answered = res;
      res.once('close', () => signal.removeEventListener('abort', aborted));
      resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body: res });
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (answered !== undefined) return; // the body's reader is told
      signal.removeEventListener('abort', aborted);
      const stale = req.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE');
      reject(stale ? new StaleConnection(error.message, { cause: error }) : error);
    });
    if (signal.aborted) aborted();
    else signal.addEventListener('abort', aborted, { once: true });
    req.end(payload);
  });
}

/** Settles when `body` ended, fails when it was cut off before its end. */
function untilEnd(body: Readable, onData: (chunk: Buffer) => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    // Cut off before its reader came (a reset right behind the head): no event will say so again.
    if (body.destroyed) return reject(body.errored ?? new Error('the answer was cut off'));
    let done = false;
    body.on('data', onData);
    body.once('end', () => {
      done = true;
      resolve();
    });
    body.once('error', reject);
    body.once('aborted', () => reject(new Error('the answer was cut off')));
    body.once('close', () => {
      if (!done) reject(new Error('the answer was cut off'));
    });
  });
}

/** The whole body as text; past `max` bytes the answer is cut off (TRY_AGAIN) or, `truncate`, the rest dropped. */
export async function readAll(body: Readable, max: number, truncate = false): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  await untilEnd(body, (chunk) => {
    size += chunk.length;
    if (size <= max) chunks.push(chunk);
    else if (!truncate) body.destroy(new Error(`the answer exceeds ${max} bytes`));
  });
  return Buffer.concat(chunks).toString('utf8');
}

/** Hands on each line of `body` as JSON as it comes; settles at the body's end. */
export async function readLines(body: Readable, onLine: (value: unknown) => void): Promise<void> {
  const decoder = new TextDecoder();
  let carry = '';
  await untilEnd(body, (chunk) => {
    const lines = (carry + decoder.decode(chunk, { stream: true })).split('\n');
    carry = lines.pop() ?? '';
    for (const line of lines) if (line.trim() !== '') onLine(parseLine(line));
  });
}
