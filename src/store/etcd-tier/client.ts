/**
 * How the etcd tier reaches etcd: the client it opens (etcd3 over gRPC), and what the connection
 * promises whatever is asked through it. Apart from etcd-tier/, which decides what is read and
 * written.
 *
 * Guarantees:
 * - nothing is dialled with a bad configuration: an endpoint that is not `http://host:port` or
 *   `https://host:port`, a TLS file that cannot be read, or a client certificate without its key
 *   (or a key without its certificate) is INVALID_CONFIG, naming what is wrong;
 * - every call that is not a stream has a deadline (the call timeout, default 2000 ms);
 * - given a counter (`requests`, etcd-requests.ts), every message sent to etcd is counted where it
 *   leaves: an interceptor on every call, unary or stream, whoever made it;
 * - a member that fails is skipped for half a second, and a failed call is tried again on another
 *   member a few times, quickly, so a leader election reads as a short delay, not an outage;
 * - an answer the client's shared watch stream cannot place is a broken stream, never the end of the
 *   agent (watch-stream-guard.ts);
 * - etcd3, cockatiel and gRPC are loaded only here, lazily, so the SQLite store never pays for them.
 */
import { readFileSync } from 'node:fs';
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { isEtcdEndpoint } from '../store.ts';
import type { Interceptor } from '@grpc/grpc-js';
import type { Etcd3 } from 'etcd3';
import { type EtcdRequestCounter, etcdRequestKindOf } from './etcd-requests.ts';
import { guardWatchStreams } from './watch-stream-guard.ts';

export interface EtcdClientOptions {
  /** Client URLs, `http://host:port` or `https://host:port`. */
  readonly endpoints: readonly string[];
  /** PEM files for TLS: CA to trust, and a client certificate and key for mutual TLS. */
  readonly tls?: { readonly ca?: string; readonly cert?: string; readonly key?: string };
  /** Deadline of each call, milliseconds. Default 2000. */
  readonly callTimeoutMs?: number;
  /** Told of every message sent to etcd (etcd-requests.ts); none: not counted. */
  readonly requests?: EtcdRequestCounter | undefined;
}

/** An interceptor that tells `requests` of each message as it leaves, by its method and content. */
async function countingInterceptor(requests: EtcdRequestCounter): Promise<Interceptor> {
  const { InterceptingCall } = await import('@grpc/grpc-js');
  return (options, nextCall) => {
    const path = options.method_definition.path;
    return new InterceptingCall(nextCall(options), {
      sendMessage: (message, next) => {
        requests.count(etcdRequestKindOf(path, message));
        next(message);
      },
    });
  };
}

/** A client for `options`, and the deadline of each of its calls in milliseconds. */
export async function openEtcdClient(options: EtcdClientOptions): Promise<{ client: Etcd3; timeout: number }> {
  if (options.endpoints.length === 0) throw new WarrenError('INVALID_CONFIG', 'etcd store: no endpoints given');
  for (const url of options.endpoints) {
    if (!isEtcdEndpoint(url))
      throw new WarrenError('INVALID_CONFIG', `etcd endpoint "${url}" is not http://host:port or https://host:port`);
  }
  const { Etcd3: Client, isRecoverableError } = await import('etcd3');
  await guardWatchStreams(); // an answer its watch bookkeeping cannot place must not end the agent
  // Cockatiel's backoff is named like core/backoff.ts's and is not the same thing: aliased.
  const {
    ConsecutiveBreaker,
    ExponentialBackoff: CockatielExponentialBackoff,
    circuitBreaker,
    handleWhen,
    retry,
  } = await import('cockatiel');
  const read = (what: string, path: string | undefined): Buffer | undefined => {
    if (path === undefined) return undefined;
    try {
      return readFileSync(path);
    } catch (error) {
      throw new WarrenError('INVALID_CONFIG', `etcd ${what} ${path} cannot be read: ${messageOf(error)}`);
    }
  };
  const ca = read('CA file', options.tls?.ca);
  const cert = read('client certificate', options.tls?.cert);
  const key = read('client key', options.tls?.key);
  if ((cert === undefined) !== (key === undefined))
    throw new WarrenError('INVALID_CONFIG', 'etcd TLS: a client certificate needs its key, and a key its certificate');
  const timeout = options.callTimeoutMs ?? 2000;
  const counting =
    options.requests === undefined ? {} : { interceptors: [await countingInterceptor(options.requests)] };
  const client = new Client({
    hosts: [...options.endpoints],
    dialTimeout: timeout,
    defaultCallOptions: (context) => ({ ...counting, ...(context.isStream ? {} : { deadline: Date.now() + timeout }) }),
    // A member that fails is skipped for half a second, not the client's default five: during a
    // leader election every member fails for a moment, and a long open breaker on all of them
    // would turn a one-second election into a five-second outage. A failed call is tried again
    // on another member a few times, quickly.
    faultHandling: {
      host: () =>
        circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 500, breaker: new ConsecutiveBreaker(3) }),
      global: retry(handleWhen(isRecoverableError), {
        maxAttempts: 4,
        backoff: new CockatielExponentialBackoff({ initialDelay: 50, maxDelay: 400 }),
      }),
    },
    ...(ca === undefined && cert === undefined
      ? {}
      : {
          credentials: {
            rootCertificate: ca ?? Buffer.alloc(0),
            ...defined({ privateKey: key, certChain: cert }),
          },
        }),
  });
  return { client, timeout };
}
