/**
 * The one HTTP/2 connection (session) a KubeApiClient multiplexes its requests and watches over, as
 * client-go does: a kube-apiserver offers h2 by ALPN on TLS, and one connection an agent instead of
 * one per watch plus a pool saves the API server a socket per watch per node. api-client.ts says
 * what is asked; this file says how it travels when the server speaks HTTP/2.
 *
 * Guarantees:
 * - the server's choice decides: the first connection offers `h2` and `http/1.1` by ALPN; when the
 *   server picks anything but `h2`, that connection is closed and `session()` answers undefined for
 *   the client's life (the caller speaks HTTP/1.1 over its pools, connection.ts);
 * - one session at a time, shared by every request and watch; callers asking while it connects share
 *   that connecting; a session that closed, failed or received a GOAWAY is dropped and the next
 *   caller connects anew (streams already open on a graceful GOAWAY finish on the old one);
 * - a stream the server provably never handled rejects with StaleConnection, so the caller may send
 *   it again once: it was refused (REFUSED_STREAM), or is above the last stream a GOAWAY named, or
 *   the session was gone before the stream could be sent. Any other failure is not StaleConnection;
 * - a request past its deadline makes the session prove it is alive: it is destroyed (its watches end
 *   as cut off and are watched again by their owners) only when nothing at all came from it within
 *   PING_TIMEOUT_MS (15 s) of its PING, neither the PING's answer nor any other byte, so a dead
 *   connection does not take every later request with it, and a live one is never re-made: a busy
 *   server still sending answers is alive whenever its PING's answer comes (under load it trailed the
 *   answers queued before it by seconds), and so is a session whose answer arrived while this
 *   process was too busy to read it (the verdict waits for the I/O already there);
 * - the session holds the process open only while a stream is open on it, as an idle keep-alive
 *   socket of node:http does not;
 * - `close` destroys the session; every stream open on it ends.
 */
import { once } from 'node:events';
import {
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  connect as connectHttp2,
  constants,
} from 'node:http2';
import { type ConnectionOptions, connect as connectTls } from 'node:tls';
import { type OpenedAnswer, StaleConnection } from './exchange.ts';

/**
 * How long a session suspected dead (a request's deadline passed) has to answer a PING: client-go's
 * PingTimeout, long enough for a busy server (a PING is answered by its event loop) to be kept.
 */
const PING_TIMEOUT_MS = 15_000;

/** What the server may send on one stream, and on the session, before it is read (Go's client's). */
const STREAM_WINDOW_BYTES = 4 * 1024 * 1024;
const SESSION_WINDOW_BYTES = 16 * 1024 * 1024;

/** Headers HTTP/2 forbids (RFC 9113 §8.2.2); the request's own credentials never need them. */
const CONNECTION_HEADERS = new Set([
  'connection',
  'host',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
]);

/** Bytes read from the session's connection so far (0 once it is gone: its socket proxy then throws). */
function bytesReadOf(session: ClientHttp2Session): number {
  try {
    return session.socket?.bytesRead ?? 0;
  } catch {
    return 0;
  }
}

/** The TLS settings of the KubeConfig (connection.ts), for the session's own connection. */
export type TlsSettings = Pick<ConnectionOptions, 'ca' | 'cert' | 'key' | 'rejectUnauthorized' | 'servername'>;

export class SharedSession {
  readonly #server: URL;
  readonly #tls: TlsSettings;
  readonly #connectTimeoutMs: number;
  readonly #pingTimeoutMs: number;
  #session: ClientHttp2Session | undefined;
  #connecting: Promise<ClientHttp2Session | undefined> | undefined;
  /** The server chose HTTP/1.1: no session is made again. */
  #http1 = false;
  #closed = false;
  /** The last stream a GOAWAY named, per session that received one. */
  readonly #lastStream = new WeakMap<ClientHttp2Session, number>();
  /** Sessions whose PING is awaited: one PING at a time proves a session alive. */
  readonly #pinging = new WeakSet<ClientHttp2Session>();
  /** Streams open, per session: it holds the process open while any is. */
  readonly #open = new WeakMap<ClientHttp2Session, number>();

  constructor(server: URL, tls: TlsSettings, connectTimeoutMs: number, pingTimeoutMs = PING_TIMEOUT_MS) {
    this.#server = server;
    this.#tls = tls;
    this.#connectTimeoutMs = connectTimeoutMs;
    this.#pingTimeoutMs = pingTimeoutMs;
  }

  /** Whether requests go over HTTP/2 (known once the first connection was made). */
  get speaksHttp2(): boolean {
    return !this.#http1 && this.#session !== undefined;
  }

  /** The session to send on; undefined when the server speaks HTTP/1.1 only. */
  session(): Promise<ClientHttp2Session | undefined> {
    if (this.#closed) return Promise.reject(new Error('the client was closed'));
    if (this.#http1) return Promise.resolve(undefined);
    const current = this.#session;
    if (current !== undefined && !current.closed && !current.destroyed) return Promise.resolve(current);
    this.#connecting ??= this.#connect().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  /**
   * One exchange on `session`: its answer's head and body, or the failure before the head
   * (StaleConnection when the server never handled it, see the header). `signal` cuts it.
   */
  open(
    session: ClientHttp2Session,
    method: string,
    path: string,
    headers: Record<string, string>,
    payload: Buffer | undefined,
    signal: AbortSignal,
  ): Promise<OpenedAnswer> {
    const sent: OutgoingHttpHeaders = { ':method': method, ':path': path };
    for (const [k, v] of Object.entries(headers)) if (!CONNECTION_HEADERS.has(k)) sent[k] = v;
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(sent, { endStream: payload === undefined, signal });
    } catch (error) {
      // The session closed or went away between `session()` and here: nothing was sent.
      throw new StaleConnection(`the HTTP/2 session was gone: ${String(error)}`, { cause: error });
    }
    this.#track(session, stream);
    if (signal.aborted) stream.destroy(signal.reason);
    else {
      const suspect = (): void => this.#suspect(session, signal);
      signal.addEventListener('abort', suspect, { once: true });
      stream.once('close', () => signal.removeEventListener('abort', suspect));
    }
    return new Promise<OpenedAnswer>((resolve, reject) => {
      let answered = false;
      stream.once('response', (head: IncomingHttpHeaders) => {
        answered = true;
        resolve({ status: Number(head[':status'] ?? 0), type: String(head['content-type'] ?? ''), body: stream });
      });
      const failed = (error: Error): void => {
        if (answered) return;
        reject(this.#unhandled(session, stream) ? new StaleConnection(error.message, { cause: error }) : error);
      };
      stream.once('error', failed);
      stream.once('close', () => failed(new Error(`the HTTP/2 stream closed (code ${stream.rstCode})`)));
      if (payload !== undefined) stream.end(payload);
    });
  }

  /** Destroys the session: every stream on it ends. */
  close(): void {
    this.#closed = true;
    this.#session?.destroy();
    this.#session = undefined;
  }

  async #connect(): Promise<ClientHttp2Session | undefined> {
    const host = this.#server.hostname.replace(/^\[|\]$/g, '');
    const socket = connectTls({
      host,
      port: Number(this.#server.port || 443),
      ALPNProtocols: ['h2', 'http/1.1'],
      ...this.#tls,
    });
    socket.setTimeout(this.#connectTimeoutMs, () =>
      socket.destroy(new Error(`no TLS handshake within ${this.#connectTimeoutMs} ms`)),
    );
    try {
      await once(socket, 'secureConnect');
    } catch (error) {
      socket.destroy();
      throw error;
    }
    socket.setTimeout(0);
    if (this.#closed || socket.alpnProtocol !== 'h2') {
      socket.destroy();
      if (this.#closed) throw new Error('the client was closed');
      this.#http1 = true;
      return undefined;
    }
    const session = connectHttp2(this.#server.origin, {
      createConnection: () => socket,
      settings: { initialWindowSize: STREAM_WINDOW_BYTES },
    });
    // Go's client windows: a LIST of megabytes is not held back by 64 KiB windows, one round trip each.
    session.on('connect', () => session.setLocalWindowSize(SESSION_WINDOW_BYTES));
    this.#open.set(session, 0);
    session.unref();
    const drop = (): void => {
      if (this.#session === session) this.#session = undefined;
    };
    session.on('goaway', (_code: number, lastStreamID: number) => {
      this.#lastStream.set(session, lastStreamID);
      drop();
    });
    session.on('error', drop);
    session.on('close', drop);
    this.#session = session;
    return session;
  }

  /** The stream was never handled by the server (see the header). */
  #unhandled(session: ClientHttp2Session, stream: ClientHttp2Stream): boolean {
    if (stream.rstCode === constants.NGHTTP2_REFUSED_STREAM) return true;
    if (stream.id === undefined) return true;
    const last = this.#lastStream.get(session);
    return last !== undefined && stream.id > last;
  }

  #track(session: ClientHttp2Session, stream: ClientHttp2Stream): void {
    const open = (this.#open.get(session) ?? 0) + 1;
    this.#open.set(session, open);
    if (open === 1) session.ref();
    stream.once('close', () => {
      const left = (this.#open.get(session) ?? 1) - 1;
      this.#open.set(session, left);
      if (left === 0 && !session.destroyed) session.unref();
    });
  }

  /** A stream was cut by its signal: when that was a deadline, the session must answer a PING. */
  #suspect(session: ClientHttp2Session, signal: AbortSignal): void {
    if (!(signal.reason instanceof DOMException && signal.reason.name === 'TimeoutError')) return;
    if (session.destroyed || session.closed || this.#pinging.has(session)) return;
    this.#pinging.add(session);
    const readBefore = bytesReadOf(session);
    let settled = false;
    const answered = (): void => {
      settled = true;
      clearTimeout(timer);
      this.#pinging.delete(session);
    };
    const verdict = (): void => {
      if (settled || session.destroyed) return;
      // Something came since the PING: the connection carries, the server is only slow to answer.
      if (bytesReadOf(session) !== readBefore) answered();
      else session.destroy(new Error(`nothing came from the API server within ${this.#pingTimeoutMs} ms of a PING`));
    };
    // After this turn's I/O: an answer that came while this process was busy is read before the verdict.
    const timer = setTimeout(() => setImmediate(verdict), this.#pingTimeoutMs);
    timer.unref();
    try {
      if (!session.ping((error) => error === null && answered())) answered();
    } catch {
      answered();
    }
  }
}
