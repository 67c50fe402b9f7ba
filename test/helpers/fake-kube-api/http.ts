/**
 * The HTTP side of the fake: request bodies (JSON or YAML, at most 3,145,728 bytes as the apiserver
 * takes them, 413 with `Connection: close` beyond) and replies with the apiserver's headers:
 * compact JSON and one newline, `Content-Type: application/json` without charset, an Audit-Id and the
 * priority-and-fairness headers; unknown paths get the mux's text/plain `404 page not found`.
 * Over HTTP/2 (the fake's `http2` option) the same answers go without the headers HTTP/2 forbids
 * (`Connection`, `Transfer-Encoding`), and an answer cut off is its stream reset (INTERNAL_ERROR),
 * as Go's server resets a stream whose handler failed, where over HTTP/1.1 the connection dies.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Http2ServerResponse, constants } from 'node:http2';
import { parseYaml } from './crds.ts';
import { badRequest, failure } from './status.ts';

export const MAX_BODY = 3_145_728;

const FLOW_SCHEMA = randomUUID();
const PRIORITY_LEVEL = randomUUID();

export function headers(): Record<string, string> {
  return {
    'Audit-Id': randomUUID(),
    'Cache-Control': 'no-cache, private',
    'Content-Type': 'application/json',
    'X-Kubernetes-Pf-Flowschema-Uid': FLOW_SCHEMA,
    'X-Kubernetes-Pf-Prioritylevel-Uid': PRIORITY_LEVEL,
  };
}

const CONNECTION_HEADERS = new Set(['connection', 'transfer-encoding', 'keep-alive', 'upgrade']);

/** Whether the answer travels over HTTP/2 (the compatibility API's response). */
function overHttp2(res: ServerResponse): boolean {
  return (res as unknown) instanceof Http2ServerResponse;
}

/** Writes the answer's head; over HTTP/2 without the headers it forbids. */
export function writeHead(res: ServerResponse, code: number, head: OutgoingHttpHeaders): void {
  if (!overHttp2(res)) return void res.writeHead(code, head);
  res.writeHead(
    code,
    Object.fromEntries(Object.entries(head).filter(([k]) => !CONNECTION_HEADERS.has(k.toLowerCase()))),
  );
}

/** Cuts the answer off before its end: the connection dies (HTTP/1.1), or the stream is reset (HTTP/2). */
export function cutAnswer(res: ServerResponse): void {
  if (overHttp2(res)) (res as unknown as Http2ServerResponse).stream.close(constants.NGHTTP2_INTERNAL_ERROR);
  else res.destroy();
}

/** Whether the answer can take no more (ended, or cut off). */
export function answerGone(res: ServerResponse): boolean {
  if (res.writableEnded) return true;
  return overHttp2(res) ? (res as unknown as Http2ServerResponse).stream.destroyed : res.destroyed;
}

export function replyJson(res: ServerResponse, code: number, body: unknown, extra: Record<string, string> = {}): void {
  const text = `${JSON.stringify(body)}\n`;
  writeHead(res, code, { ...headers(), ...extra, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

export function replyNotFoundText(res: ServerResponse): void {
  const text = '404 page not found\n';
  res.writeHead(404, {
    'Cache-Control': 'no-cache, private',
    'Content-Type': 'text/plain; charset=utf-8',
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** The raw body; 413 past MAX_BODY (the rest is drained). */
export function readRaw(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolveBody, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      if (size > MAX_BODY)
        return reject(failure(413, 'RequestEntityTooLarge', `Request entity too large: limit is ${MAX_BODY}`));
      resolveBody(Buffer.concat(chunks));
    });
  });
}

/** The core resources' body: JSON only. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const text = (await readRaw(req)).toString('utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badRequest(`the body of the request is not valid JSON: ${(error as Error).message}`);
  }
}

export const mediaType = (req: IncomingMessage): string =>
  (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';

/** A custom resource's or Lease's body, JSON or YAML; `undefined` when empty (a DELETE without options). */
export async function readObject(req: IncomingMessage, kind: string): Promise<unknown> {
  const raw = await readRaw(req);
  if (raw.length === 0) return undefined;
  const text = raw.toString('utf8');
  const type = mediaType(req);
  if (type === 'application/vnd.kubernetes.protobuf')
    throw badRequest(
      `the object provided is unrecognized (must be of type ${kind}): provided data does not appear to be a protobuf message`,
    );
  try {
    return type === 'application/yaml' ? parseYaml(text) : JSON.parse(text);
  } catch (error) {
    throw badRequest(
      `the object provided is unrecognized (must be of type ${kind}): couldn't get version/kind; json parse error: ${(error as Error).message}`,
    );
  }
}
