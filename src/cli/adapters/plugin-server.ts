/**
 * What a runtime adapter uses to serve Warren: kubelet's `Registration` handshake and Warren's
 * `warren.event-source` v1 `EventSource`, both on one unix socket (the PluginInfo's endpoint is
 * empty), over an `EventFeed` the adapter implements for its runtime.
 *
 * Guarantees:
 * - The socket appears at its path only once it answers: the server binds at a dot-name in the
 *   same directory (the registry ignores dot-files) and renames it into place. A stale socket at
 *   the path is replaced; anything else there is refused, never removed.
 * - Watch subscribes to the feed before it answers (response headers), and the client lists only
 *   after that answer, so no event falls between a listing and the stream. Each watcher gets the
 *   feed's events in the order the feed gave them, and a heartbeat every interval it asked for
 *   (clamped to 1 s..60 s; 10 s when it asked for none) on the clock. Any number of watchers at
 *   once (Warren restarting opens a new one before the old one is noticed gone); a cancelled one
 *   unsubscribes.
 * - What is sent is checked with Warren's own decoder first: an event Warren would refuse is logged
 *   and not sent, a listing Warren would refuse fails the List call with the reason, and netns
 *   prefixes Warren would refuse make `servePlugin` throw. An adapter's mistake shows in its log.
 * - The socket's directory is made when missing: the adapter may start before Warren.
 * - `close` ends every watcher, stops the server and removes the socket only if it is still the
 *   one this server bound (same inode): a newer adapter's socket is left alone.
 */
import { randomBytes } from 'node:crypto';
import { lstat, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import {
  Metadata,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type sendUnaryData,
  status as grpcStatus,
} from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { decodeEvent, decodeListing, encodeEvent, encodeListing } from '../../api/plugins/event-codec.ts';
import {
  EMPTY,
  EVENT_SOURCE_TYPE,
  EVENT_SOURCE_VERSIONS,
  MESSAGES,
  METHODS,
  type RegistrationStatus,
  type RuntimeEvent,
  decodeMessage,
  decodeStatus,
  encodeInfo,
} from '../../api/plugins/wire.ts';
import { type CancelTimer, type Clock, systemClock } from '../../core/clock.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { makeDirectory } from '../../core/make-directory.ts';

export interface EventFeed {
  /** The containers that exist now. */
  list(): Promise<readonly string[]>;
  /** Calls `listener` for each lifecycle event until the returned function is called. */
  subscribe(listener: (event: RuntimeEvent) => void): () => void;
}

export interface PluginServerOptions {
  /** Where the socket goes (typically in Warren's plugins directory). */
  readonly socket: string;
  /** The adapter's name in its PluginInfo. */
  readonly name: string;
  /** Which allocations the adapter answers for (List's netns_prefixes). */
  readonly netnsPrefixes: readonly string[];
  readonly feed: EventFeed;
  readonly logger: Logger;
  /** For heartbeats. Default: the system clock. */
  readonly clock?: Clock;
  /** Called with each NotifyRegistrationStatus Warren sends. */
  readonly onRegistrationStatus?: (status: RegistrationStatus) => void;
}

export interface PluginServer {
  readonly socket: string;
  close(): Promise<void>;
  /** Resolves with the next NotifyRegistrationStatus Warren sends. */
  nextRegistration(): Promise<RegistrationStatus>;
}

const DEFAULT_HEARTBEAT_MS = 10_000;
const MIN_HEARTBEAT_MS = 1_000;
const MAX_HEARTBEAT_MS = 60_000;
/** How long `close` waits for calls to finish before cutting them. */
const SHUTDOWN_GRACE_MS = 5_000;

/** The interval a watcher asked for, clamped to what an adapter sends. */
export function heartbeatInterval(asked: number): number {
  if (!Number.isFinite(asked) || asked <= 0) return DEFAULT_HEARTBEAT_MS;
  return Math.min(MAX_HEARTBEAT_MS, Math.max(MIN_HEARTBEAT_MS, asked));
}

const raw = (bytes: Buffer): Buffer => bytes;

function method(path: string, responseStream: boolean) {
  return {
    path,
    requestStream: false,
    responseStream,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  };
}

const REGISTRATION: ServiceDefinition = {
  GetInfo: method(METHODS.getInfo, false),
  NotifyRegistrationStatus: method(METHODS.notifyRegistrationStatus, false),
};
const EVENT_SOURCE: ServiceDefinition = {
  Watch: method(METHODS.watch, true),
  List: method(METHODS.list, false),
};

/** Removes what is at `path` if it is a socket; refuses anything else. */
async function removeStaleSocket(path: string): Promise<void> {
  const stat = await lstat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  if (stat === undefined) return;
  if (!stat.isSocket())
    throw new WarrenError('INVALID_CONFIG', `${path} exists and is not a socket; refusing to replace it`);
  await unlink(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}

function bind(server: Server, path: string): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    server.bindAsync(`unix://${path}`, ServerCredentials.createInsecure(), (error) =>
      error ? reject(error) : resolvePromise(),
    );
  });
}

export async function servePlugin(o: PluginServerOptions): Promise<PluginServer> {
  const socket = resolve(o.socket);
  const clock = o.clock ?? systemClock;
  const logger = o.logger.child({ plugin: o.name, socket });
  const prefixes = decodeListing(encodeListing({ ids: [], netnsPrefixes: o.netnsPrefixes }));
  if (typeof prefixes === 'string')
    throw new WarrenError('INVALID_CONFIG', `netns prefixes Warren would refuse: ${prefixes}`);

  /** The Watch calls open now, each with what ends it (unsubscribes, stops its heartbeat, ends the call). */
  const watchers = new Set<() => void>();
  /** Callers of nextRegistration waiting for the next notification. */
  let waiters: Array<(status: RegistrationStatus) => void> = [];

  const server = new Server();
  server.addService(REGISTRATION, {
    GetInfo: (_call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
      callback(
        null,
        encodeInfo({ type: EVENT_SOURCE_TYPE, name: o.name, endpoint: '', supportedVersions: EVENT_SOURCE_VERSIONS }),
      );
    },
    NotifyRegistrationStatus: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
      const status = decodeStatus(call.request);
      if (typeof status === 'string') {
        logger.warn({ reason: status }, 'unreadable registration status');
        callback({ code: grpcStatus.INVALID_ARGUMENT, details: status });
        return;
      }
      if (status.registered) logger.info('registered with Warren');
      else logger.warn({ error: status.error }, 'Warren refused the registration');
      try {
        o.onRegistrationStatus?.(status);
      } catch (error) {
        logger.error({ err: error }, 'onRegistrationStatus threw');
      }
      const woken = waiters;
      waiters = [];
      for (const wake of woken) wake(status);
      callback(null, EMPTY);
    },
  });
  server.addService(EVENT_SOURCE, {
    Watch: (call: ServerWritableStream<Buffer, Buffer>) => {
      let asked = 0;
      try {
        asked = Number(
          (
            MESSAGES.WatchRequest.toObject(decodeMessage(MESSAGES.WatchRequest, call.request)) as {
              heartbeat_interval_ms?: number;
            }
          ).heartbeat_interval_ms ?? 0,
        );
      } catch (error) {
        logger.warn({ reason: messageOf(error) }, 'unreadable WatchRequest; using the default heartbeat');
      }
      const interval = heartbeatInterval(asked);
      let ended = false;
      let heartbeat: CancelTimer | undefined;
      let unsubscribe: (() => void) | undefined;
      const end = (): void => {
        if (ended) return;
        ended = true;
        watchers.delete(finish);
        heartbeat?.();
        unsubscribe?.();
        logger.debug('watcher gone');
      };
      /** Ends the call from this side (on close): the watcher sees the stream end and reopens elsewhere. */
      const finish = (): void => {
        end();
        if (!call.writableEnded) call.end();
      };
      watchers.add(finish);
      call.on('cancelled', end);
      call.on('close', end);
      call.on('error', end);
      const send = (bytes: Buffer): void => {
        if (!ended) call.write(bytes);
      };
      try {
        // Subscribed before the answer: the client lists only once it has the answer.
        unsubscribe = o.feed.subscribe((event) => {
          // Never throws into the feed: one bad event must not break the adapter's runtime watch.
          let bytes: Buffer;
          try {
            bytes = encodeEvent(event);
          } catch (error) {
            logger.warn({ event, reason: messageOf(error) }, 'event does not encode; not sent');
            return;
          }
          const checked = decodeEvent(bytes);
          if (checked.kind !== 'event') {
            logger.warn(
              { event, reason: checked.kind === 'malformed' ? checked.reason : checked.kind },
              'event Warren would refuse; not sent',
            );
            return;
          }
          send(bytes);
        });
      } catch (error) {
        end();
        logger.error({ err: error }, 'could not subscribe to the runtime');
        call.emit('error', {
          code: grpcStatus.UNAVAILABLE,
          details: `could not subscribe to the runtime: ${messageOf(error)}`,
        });
        return;
      }
      if (ended) {
        unsubscribe();
        return;
      }
      call.sendMetadata(new Metadata());
      const beat = (): void => {
        heartbeat = clock.setTimer(interval, () => {
          if (ended) return;
          send(encodeEvent({ kind: 'heartbeat' }));
          beat();
        });
      };
      beat();
      logger.debug({ heartbeatMs: interval }, 'watcher subscribed');
    },
    List: (_call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
      void (async () => {
        let ids: readonly string[];
        try {
          ids = await o.feed.list();
        } catch (error) {
          logger.warn({ err: error }, 'could not list the runtime');
          callback({ code: grpcStatus.UNAVAILABLE, details: `could not list the runtime: ${messageOf(error)}` });
          return;
        }
        let bytes: Buffer;
        let checked: ReturnType<typeof decodeListing>;
        try {
          bytes = encodeListing({ ids, netnsPrefixes: o.netnsPrefixes });
          checked = decodeListing(bytes);
        } catch (error) {
          checked = `listing does not encode: ${messageOf(error)}`;
          bytes = EMPTY;
        }
        if (typeof checked === 'string') {
          logger.error({ reason: checked }, 'listing Warren would refuse');
          callback({ code: grpcStatus.INTERNAL, details: checked });
          return;
        }
        callback(null, bytes);
      })();
    },
  });

  // Short, so the temporary path fits where the final one does (sun_path is 108 bytes).
  const temporary = join(dirname(socket), `.${randomBytes(4).toString('hex')}`);
  let ino: number;
  try {
    // The adapter may start before Warren has made its plugins directory.
    makeDirectory(dirname(socket), 0o777);
    await removeStaleSocket(socket);
    await bind(server, temporary);
    await rename(temporary, socket);
    ino = (await lstat(socket)).ino;
  } catch (error) {
    server.forceShutdown();
    await unlink(temporary).catch(() => undefined);
    if (error instanceof WarrenError) throw error;
    throw new WarrenError('IO_FAILURE', `cannot serve ${basename(socket)} at ${socket}: ${messageOf(error)}`, {
      cause: error,
    });
  }
  logger.info({ type: EVENT_SOURCE_TYPE, versions: EVENT_SOURCE_VERSIONS }, 'serving Warren');

  let closing: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    for (const finish of [...watchers]) finish();
    await new Promise<void>((done) => {
      const cut = clock.setTimer(SHUTDOWN_GRACE_MS, () => {
        server.forceShutdown();
        done();
      });
      server.tryShutdown(() => {
        cut();
        done();
      });
    });
    const stat = await lstat(socket).catch(() => undefined);
    if (stat?.isSocket() && stat.ino === ino) await unlink(socket).catch(() => undefined);
    logger.info('stopped serving Warren');
  };

  return {
    socket,
    close: () => (closing ??= close()),
    nextRegistration: () => new Promise((wake) => waiters.push(wake)),
  };
}
