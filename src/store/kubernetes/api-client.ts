/**
 * How the cluster tier reaches the Kubernetes API server: one request at a time, JSON in and out,
 * with the credentials and TLS settings of a kubeconfig (kube-access.ts). Over HTTP/2
 * when the server offers it by ALPN (a kube-apiserver does): every request and watch is a stream of
 * one shared connection (http2-session.ts), unless `http2: false` (or WARREN_KUBE_HTTP2=0). Over
 * HTTP/1.1 otherwise (plain http, a proxy, a server that picks it): keep-alive connections, a pool
 * for requests and one for watches (connection.ts). Apart from kubernetes/tier.ts and its parts,
 * which decide what is asked.
 *
 * Guarantees:
 * - every request has a deadline (`requestTimeoutMs`, default 10 s) and a bounded answer (16 MiB);
 * - a request sent on a reused keep-alive connection that fails before any byte of its answer came
 *   (ECONNRESET, EPIPE: "socket hang up") is sent again once, on a new connection made for it (never
 *   another kept one, which the server may have closed alike: connection.ts), within the same
 *   deadline. That failure means the server had closed the idle connection before it read the
 *   request (its idle timeout raced the send), so the request was never handled and sending it again
 *   is safe whatever its method: the standard behaviour of HTTP clients (Go's net/http, browsers).
 *   Over HTTP/2 the same holds for a stream the server refused (REFUSED_STREAM) or left above the
 *   last stream its GOAWAY named (RFC 9113 §6.8: not processed). Any other failure, on a fresh
 *   connection, or after the answer began, is never retried here;
 * - any failure to get an answer (refused, reset, TLS, DNS, the deadline, the client closed) is a
 *   WarrenError TRY_AGAIN (CNI code 11) naming the API server and what was being done;
 * - every HTTP answer comes back as a value (`ApiAnswer`): what a status means is the caller's to
 *   say, by status code and by the `Status` body's structure (`ApiFailure`), never by its prose;
 * - `refusal` turns an answer the caller did not expect into the WarrenError it means: 429, 5xx and
 *   504 are TRY_AGAIN naming the API server; a 404 that is not a Status (the API server's text
 *   `404 page not found`) says the CRDs of warren.dev are not installed; a 403 names the permission
 *   missing; anything else is IO_FAILURE with the server's Status;
 * - `stream` (a watch) has no deadline of its own beyond the server's `timeoutSeconds` and the
 *   client's close; each line of its answer is handed on as it comes, none held after; over
 *   HTTP/1.1 watches have connections of their own, as many as are open, so requests never wait
 *   behind them (nor they behind requests: connection.ts); over HTTP/2 each is a stream of the
 *   shared session, and when that session is cut the watch ends as cut off (its owner watches again);
 * - credentials are applied to each request (a rotated service account token is picked up), while
 *   connections are kept alive and reused between requests (the library's own fetch layer opens a
 *   new connection pool per request);
 * - every request that left is counted once (`requests`, api-requests.ts: a resend after a stale
 *   connection is one), and carries `userAgent`, so an audit log names the agent and its node.
 */
import { Listeners } from '../../core/listeners.ts';
import type { Agent } from 'node:http';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { type ApiFailure, failureOfResponse, refusalOf } from './api-failure.ts';
import { type ApiRequestCounter, asksWatch } from './api-requests.ts';
import { type ConnectionPools, connectionOf, credentialHeaders } from './connection.ts';
import {
  type HttpMethod,
  type OpenedAnswer,
  StaleConnection,
  openHttp1,
  readAll,
  readLines,
  untilAborted,
} from './exchange.ts';
import { SharedSession } from './http2-session.ts';
import type { KubeAccess } from './kube-access.ts';

/** Largest answer read; a larger one is cut off (TRY_AGAIN) rather than held in memory. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

export type { HttpMethod };

export interface ApiRequest {
  readonly method: HttpMethod;
  /** The path, e.g. `/apis/warren.dev/v1alpha1/warrenblocks/x`. */
  readonly path: string;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  /** Sent as JSON. */
  readonly body?: unknown;
  /** Default `application/json`; `application/merge-patch+json` for a merge patch. */
  readonly contentType?: string;
}

/** An HTTP answer: its status, the body parsed when it is JSON, and the failure it describes when not 2xx. */
export interface ApiAnswer {
  readonly status: number;
  readonly body: unknown;
  /** The answer as a failure (Status parsed): for statuses other than 2xx. */
  readonly failure: ApiFailure;
  /** Whether the body was JSON (a 404 that is not JSON comes from an unregistered path). */
  readonly json: boolean;
}

export interface KubeApiClientOptions {
  readonly kubeConfig: KubeAccess;
  /** Deadline of each request, milliseconds. Default 10000. */
  readonly requestTimeoutMs?: number;
  /** Largest answer read, bytes (tests). Default 16 MiB. */
  readonly maxAnswerBytes?: number;
  /** How long an HTTP/2 session suspected dead has to show it lives, ms (tests). Default 15000. */
  readonly pingTimeoutMs?: number;
  /** Told of every request sent (api-requests.ts); none: not counted. */
  readonly requests?: ApiRequestCounter | undefined;
  /** The User-Agent of every request: `warren/<version> (node <name>)`. Default `warren`. */
  readonly userAgent?: string | undefined;
  /**
   * Whether HTTP/2 is spoken to an https server that offers it. Default true, unless the
   * environment variable WARREN_KUBE_HTTP2 is `0` or `false`.
   */
  readonly http2?: boolean | undefined;
}

/** Whether HTTP/2 is on when the options do not say: WARREN_KUBE_HTTP2 turns it off. */
function http2ByDefault(): boolean {
  const set = process.env.WARREN_KUBE_HTTP2?.trim().toLowerCase();
  return set !== '0' && set !== 'false' && set !== 'off';
}

export class KubeApiClient {
  readonly #config: KubeAccess;
  readonly #server: URL;
  readonly #timeoutMs: number;
  /** Connections for requests, and for watches (streams), apart: HTTP/1.1. */
  readonly #pools: ConnectionPools;
  /** The one HTTP/2 connection, where it may be tried. */
  readonly #session: SharedSession | undefined;
  readonly #maxAnswerBytes: number;
  readonly #requests: ApiRequestCounter | undefined;
  readonly #userAgent: string;
  /** Aborts every request in flight when the client closes. */
  readonly #closing = new AbortController();
  /** Whether the last request or watch found the API server away (no answer, or a 5xx). */
  #away = false;
  /** Told each time the API server answers again after it was away (`whenBack`). */
  readonly #back = new Listeners();

  private constructor(connection: Awaited<ReturnType<typeof connectionOf>>, o: KubeApiClientOptions) {
    this.#config = o.kubeConfig;
    this.#server = connection.server;
    this.#pools = connection.pools;
    this.#timeoutMs = o.requestTimeoutMs ?? 10_000;
    this.#session =
      connection.http2 === undefined
        ? undefined
        : new SharedSession(connection.server, connection.http2, this.#timeoutMs, o.pingTimeoutMs);
    this.#maxAnswerBytes = o.maxAnswerBytes ?? MAX_ANSWER_BYTES;
    this.#requests = o.requests;
    this.#userAgent = o.userAgent ?? 'warren';
  }

  /** A client for the KubeConfig's current cluster; INVALID_CONFIG when it names none usable. */
  static async open(options: KubeApiClientOptions): Promise<KubeApiClient> {
    const connection = await connectionOf(options.kubeConfig, options.http2 ?? http2ByDefault());
    return new KubeApiClient(connection, options);
  }

  /** The API server, as operators know it (`https://host:port`). */
  get server(): string {
    return this.#server.origin;
  }

  /** Whether the requests go over one HTTP/2 connection (known after the first request). */
  get http2(): boolean {
    return this.#session?.speaksHttp2 ?? false;
  }

  /**
   * Calls `listener` each time the API server answers (below 500) after a request or watch found it
   * away: what waits out a backoff may try again now. The function returned stops it.
   */
  whenBack(listener: () => void): () => void {
    return this.#back.add(listener);
  }

  /** The API server answered `status`, or nothing (undefined). */
  #answered(status: number | undefined): void {
    if (status === undefined || status >= 500) {
      this.#away = true;
      return;
    }
    if (!this.#away) return;
    this.#away = false;
    this.#back.tell();
  }

  /** One request; its answer whatever the status, or TRY_AGAIN when none came (`what` says what for). */
  async send(what: string, req: ApiRequest): Promise<ApiAnswer> {
    const url = this.#url(req);
    const headers = await this.#headers(what);
    const payload = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body));
    if (payload !== undefined) {
      headers['content-type'] = req.contentType ?? 'application/json';
      headers['content-length'] = String(payload.length);
    }
    const signal = AbortSignal.any([this.#closing.signal, AbortSignal.timeout(this.#timeoutMs)]);
    let raw: { status: number; type: string; text: string };
    try {
      const exchange = async (agent: Agent): Promise<typeof raw> => {
        const answer = await this.#open(url, req.method, headers, payload, agent, signal);
        return { status: answer.status, type: answer.type, text: await readAll(answer.body, this.#maxAnswerBytes) };
      };
      try {
        raw = await exchange(this.#pools.requests);
      } catch (error) {
        // Never handled (see the header): once more, on a connection of its own.
        if (!(error instanceof StaleConnection) || signal.aborted) throw error;
        raw = await exchange(this.#pools.fresh);
      }
    } catch (error) {
      this.#requests?.countRequest(req.method, req.path, asksWatch(req.query?.watch), undefined);
      if (!this.#closing.signal.aborted) this.#answered(undefined);
      const why = signal.aborted
        ? this.#closing.signal.aborted
          ? 'the client was closed'
          : `no answer within ${this.#timeoutMs} ms`
        : messageOf(error);
      throw new WarrenError(
        'TRY_AGAIN',
        `the Kubernetes API server ${this.server} could not be reached (${what}): ${why}`,
        {
          cause: error,
        },
      );
    }
    this.#requests?.countRequest(req.method, req.path, asksWatch(req.query?.watch), raw.status);
    this.#answered(raw.status);
    let body: unknown;
    let json = false;
    if (raw.type.includes('json')) {
      try {
        body = JSON.parse(raw.text);
        json = true;
      } catch {
        body = raw.text;
      }
    } else body = raw.text;
    return { status: raw.status, body, json, failure: failureOfResponse(raw.status, raw.text) };
  }

  /**
   * A GET whose answer is read as it comes, one JSON value a line (a watch): `onLine` is given each,
   * and the promise settles when the server ends it (its status; for a status other than 200, the
   * answer's body too, as `send` gives it). TRY_AGAIN when it could not be made or was cut off;
   * `signal` (or the client's close) ends it quietly, as an end. `onAnswer` is told the status as
   * soon as the answer's head arrived, before any line: the server took the request.
   */
  async stream(
    what: string,
    request: Omit<ApiRequest, 'method' | 'body'>,
    onLine: (value: unknown) => void,
    signal: AbortSignal,
    onAnswer?: (status: number) => void,
  ): Promise<ApiAnswer> {
    const url = this.#url(request);
    const headers = await this.#headers(what);
    const both = AbortSignal.any([this.#closing.signal, signal]);
    const ended = { status: 200, body: undefined, json: false, failure: failureOfResponse(200, '') };
    let answered = false;
    try {
      const answer = await this.#open(url, 'GET', headers, undefined, this.#pools.watches, both);
      answered = true;
      this.#requests?.countRequest('GET', request.path, true, answer.status);
      this.#answered(answer.status);
      onAnswer?.(answer.status);
      if (answer.status !== 200) {
        const text = await readAll(answer.body, 65_536, true);
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {}
        return {
          status: answer.status,
          body,
          json: typeof body !== 'string',
          failure: failureOfResponse(answer.status, text),
        };
      }
      await readLines(answer.body, onLine);
      return ended;
    } catch (error) {
      if (both.aborted) return ended;
      // No answer at all (an answer cut later was counted when it began).
      if (!answered) this.#requests?.countRequest('GET', request.path, true, undefined);
      this.#answered(undefined); // none, or cut off: away
      throw new WarrenError(
        'TRY_AGAIN',
        `the Kubernetes API server ${this.server} could not be reached (${what}): ${messageOf(error)}`,
        { cause: error },
      );
    }
  }

  /**
   * The WarrenError an answer the caller did not expect means (see the header). `resource` names
   * what was asked for (`create warrenblocks.warren.dev`), for a refusal without a body.
   */
  refusal(what: string, answer: ApiAnswer, verb: string, resource: string): WarrenError {
    return refusalOf(this.server, what, answer, verb, resource);
  }

  /** Closes kept connections and fails requests in flight (TRY_AGAIN). */
  close(): void {
    this.#closing.abort();
    this.#session?.close();
    this.#pools.requests.destroy();
    this.#pools.watches.destroy();
    this.#pools.fresh.destroy();
  }

  #url(req: Pick<ApiRequest, 'path' | 'query'>): URL {
    const url = new URL(this.#server.pathname.replace(/\/+$/, '') + req.path, this.#server);
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    return url;
  }

  #headers(what: string): Promise<Record<string, string>> {
    return credentialHeaders(this.#config, what, this.#userAgent);
  }

  /** One exchange's answer head and body, over the shared HTTP/2 session or else `agent`'s HTTP/1.1. */
  async #open(
    url: URL,
    method: HttpMethod,
    headers: Record<string, string>,
    payload: Buffer | undefined,
    agent: Agent,
    signal: AbortSignal,
  ): Promise<OpenedAnswer> {
    const session = this.#session === undefined ? undefined : await untilAborted(this.#session.session(), signal);
    if (session !== undefined && this.#session !== undefined)
      return this.#session.open(session, method, url.pathname + url.search, headers, payload, signal);
    return openHttp1(url, method, headers, payload, agent, signal);
  }
}
