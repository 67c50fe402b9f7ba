/**
 * A runtime adapter whose every move a test makes: a real gRPC server on a unix socket serving
 * Warren's `warren.event-source` service with raw bytes (so a test can write garbage, unknown
 * kinds, or nothing at all), List answers the test controls, and, when given a PluginInfo,
 * kubelet's registration service too, recording what Warren notifies.
 */
import assert from 'node:assert/strict';
import {
  Metadata,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { encodeListing } from '../../src/api/plugins/event-codec.ts';
import {
  EMPTY,
  MESSAGES,
  METHODS,
  type PluginInfo,
  type RegistrationStatus,
  type RuntimeListing,
  decodeStatus,
  encodeInfo,
} from '../../src/api/plugins/wire.ts';
import { waitFor } from './processes.ts';

const raw = (b: Buffer): Buffer => b;
const method = (path: string, responseStream: boolean) => ({
  path,
  requestStream: false,
  responseStream,
  requestSerialize: raw,
  requestDeserialize: raw,
  responseSerialize: raw,
  responseDeserialize: raw,
});
const EVENT_SOURCE: ServiceDefinition = { Watch: method(METHODS.watch, true), List: method(METHODS.list, false) };
const REGISTRATION: ServiceDefinition = {
  GetInfo: method(METHODS.getInfo, false),
  NotifyRegistrationStatus: method(METHODS.notifyRegistrationStatus, false),
};
export const LISTING: RuntimeListing = { ids: ['c1', 'c2'], netnsPrefixes: ['/run/netns/netns-'] };

export interface Watch {
  readonly call: ServerWritableStream<Buffer, Buffer>;
  readonly heartbeatMs: number;
  cancelled: boolean;
}

export class ScriptedAdapter {
  readonly socket: string;
  readonly watches: Watch[] = [];
  /** What Warren notified, in order (registration only). */
  readonly notified: RegistrationStatus[] = [];
  lists = 0;
  /** Whether Watch answers with headers at once (else only with its first message). */
  headers = true;
  /** What List answers; a pending promise holds List until the test settles it. */
  answer: () => Promise<Buffer> = async () => encodeListing(LISTING);
  readonly #info: PluginInfo | undefined;
  #server: Server | undefined;

  /** With `info`, the socket also serves the registration handshake (the plugin's own socket). */
  constructor(socket: string, info?: PluginInfo) {
    this.socket = socket;
    this.#info = info;
  }

  async start(): Promise<void> {
    const server = new Server();
    server.addService(EVENT_SOURCE, {
      Watch: (call: ServerWritableStream<Buffer, Buffer>) => {
        const request = MESSAGES.WatchRequest.toObject(MESSAGES.WatchRequest.decode(call.request)) as {
          heartbeat_interval_ms?: number;
        };
        const watch: Watch = { call, heartbeatMs: request.heartbeat_interval_ms ?? 0, cancelled: false };
        call.on('cancelled', () => (watch.cancelled = true));
        this.watches.push(watch);
        if (this.headers) call.sendMetadata(new Metadata());
      },
      List: (_call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
        this.lists += 1;
        this.answer().then(
          (bytes) => callback(null, bytes),
          (error: Error) => callback(error),
        );
      },
    });
    const info = this.#info;
    if (info !== undefined) {
      server.addService(REGISTRATION, {
        GetInfo: (_call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) =>
          callback(null, encodeInfo(info)),
        NotifyRegistrationStatus: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
          const status = decodeStatus(call.request);
          if (typeof status !== 'string') this.notified.push(status);
          callback(null, EMPTY); // RegistrationStatusResponse has no fields
        },
      });
    }
    try {
      await new Promise<void>((resolve, reject) =>
        server.bindAsync(`unix://${this.socket}`, ServerCredentials.createInsecure(), (e) =>
          e ? reject(e) : resolve(),
        ),
      );
    } catch (error) {
      server.forceShutdown(); // a server that failed to bind keeps nothing open behind the test
      throw error;
    }
    this.#server = server;
  }

  /** Gone at once, as a crashed adapter is. */
  stop(): void {
    this.#server?.forceShutdown();
    this.#server = undefined;
  }

  /** The newest Watch, once it is the `n`-th (1-based). */
  watch(n: number): Promise<Watch> {
    return waitFor(`watch #${n}`, () => (this.watches.length >= n ? this.watches[n - 1] : undefined));
  }

  /** Writes to the newest stream. */
  write(bytes: Uint8Array): void {
    const watch = this.watches.at(-1);
    assert.ok(watch, 'no stream to write to');
    watch.call.write(Buffer.from(bytes));
  }
}
