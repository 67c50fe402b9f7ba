/**
 * A small client of containerd's gRPC API on its unix socket (@grpc/grpc-js), with Warren's own
 * message definitions (containerd.proto beside this file, read with protobufjs): subscribe to
 * events, list containers, and decode the events Warren acts on. Decoding never throws: an event
 * with an unknown type or a payload that does not decode comes back as `ignored` or `malformed`
 * with the reason, so one bad event cannot stop a stream.
 */
import { fileURLToPath } from 'node:url';
import { Client, type ClientReadableStream, Metadata, status as grpcStatus } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { LOCAL_SUBCHANNEL_POOL, closingInsecureCredentials } from '../closing-credentials.ts';

// keepCase: field names as written in the .proto (type_url, container_id), not camelCased.
const root = new protobuf.Root().loadSync(fileURLToPath(new URL('./containerd.proto', import.meta.url)), {
  keepCase: true,
});
const type = (name: string): protobuf.Type => root.lookupType(`warren.containerd.${name}`);
const T = {
  SubscribeRequest: type('SubscribeRequest'),
  Envelope: type('Envelope'),
  ListContainersRequest: type('ListContainersRequest'),
  ListContainersResponse: type('ListContainersResponse'),
  ContainerDelete: type('ContainerDelete'),
  TaskExit: type('TaskExit'),
  TaskDelete: type('TaskDelete'),
};

const SUBSCRIBE = '/containerd.services.events.v1.Events/Subscribe';
const LIST_CONTAINERS = '/containerd.services.containers.v1.Containers/List';
const NAMESPACE_HEADER = 'containerd-namespace';

/** Topics whose events can release addresses. */
export const TOPICS = ['/containers/delete', '/tasks/exit', '/tasks/delete'] as const;

export interface RawEnvelope {
  readonly namespace: string;
  readonly topic: string;
  readonly typeUrl: string;
  readonly value: Uint8Array;
}

export type ContainerEvent =
  | { readonly kind: 'container-delete'; readonly namespace: string; readonly containerID: string }
  | {
      readonly kind: 'task-exit';
      readonly namespace: string;
      readonly containerID: string;
      readonly pid: number;
      readonly exitStatus: number;
    }
  | {
      readonly kind: 'task-delete';
      readonly namespace: string;
      readonly containerID: string;
      readonly pid: number;
      readonly exitStatus: number;
    };

/** A container as listed: its ID, labels and runtime spec (an Any whose value is the spec's JSON). */
export interface ListedContainer {
  readonly id: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly spec?: { readonly type_url: string; readonly value: Uint8Array } | null;
}

export type Decoded =
  | { readonly kind: 'event'; readonly event: ContainerEvent }
  /** Well-formed but not something Warren acts on (another type, an exec process). */
  | { readonly kind: 'ignored'; readonly reason: string }
  | { readonly kind: 'malformed'; readonly reason: string };

function typeName(typeUrl: string): string {
  return typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
}

/** Decodes one envelope's payload. Never throws. */
export function decodeEvent(envelope: RawEnvelope): Decoded {
  const name = typeName(envelope.typeUrl);
  const where =
    `event ${JSON.stringify(envelope.typeUrl)} on ${JSON.stringify(envelope.topic)} in namespace ` +
    `${JSON.stringify(envelope.namespace)}`;
  const decode = (t: protobuf.Type): Record<string, unknown> | string => {
    try {
      return t.toObject(t.decode(envelope.value), { defaults: true, longs: Number }) as Record<string, unknown>;
    } catch (error) {
      return `${where}: payload does not decode (${error instanceof Error ? error.message : String(error)})`;
    }
  };
  const id = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
  switch (name) {
    case 'containerd.events.ContainerDelete': {
      const m = decode(T.ContainerDelete);
      if (typeof m === 'string') return { kind: 'malformed', reason: m };
      const containerID = id(m.id);
      if (containerID === undefined) return { kind: 'malformed', reason: `${where}: no container id` };
      return { kind: 'event', event: { kind: 'container-delete', namespace: envelope.namespace, containerID } };
    }
    case 'containerd.events.TaskExit':
    case 'containerd.events.TaskDelete': {
      const exit = name === 'containerd.events.TaskExit';
      const m = decode(exit ? T.TaskExit : T.TaskDelete);
      if (typeof m === 'string') return { kind: 'malformed', reason: m };
      const containerID = id(m.container_id);
      if (containerID === undefined) return { kind: 'malformed', reason: `${where}: no container_id` };
      const process = typeof m.id === 'string' ? m.id : '';
      // An exec'd process ending says nothing about the container's own (init) process.
      if (process !== '' && process !== containerID)
        return { kind: 'ignored', reason: `${where}: exec process ${process} of ${containerID}` };
      return {
        kind: 'event',
        event: {
          kind: exit ? 'task-exit' : 'task-delete',
          namespace: envelope.namespace,
          containerID,
          pid: Number(m.pid ?? 0),
          exitStatus: Number(m.exit_status ?? 0),
        },
      };
    }
    default:
      return { kind: 'ignored', reason: `${where}: a type Warren does not act on` };
  }
}

/** Filters for Subscribe: the release topics in each namespace. */
export function subscribeFilters(namespaces: readonly string[]): string[] {
  return namespaces.flatMap((ns) => TOPICS.map((topic) => `namespace==${ns},topic==${JSON.stringify(topic)}`));
}

export interface Subscription {
  /** Resolves once the connection is up and the subscription request is on it. */
  readonly ready: Promise<void>;
  cancel(): void;
}

export class ContainerdClient {
  readonly socket: string;
  readonly #client: Client;

  constructor(socket: string) {
    this.socket = socket;
    // Closing the client closes its connection too, answered or not (closing-credentials.ts).
    this.#client = new Client(`unix://${socket}`, closingInsecureCredentials(), {
      ...LOCAL_SUBCHANNEL_POOL,
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
    });
  }

  /**
   * Streams raw envelopes matching `filters` until cancelled or the stream ends; `onEnd` is told
   * why it ended (undefined when cancelled).
   */
  subscribe(
    filters: readonly string[],
    onEnvelope: (envelope: RawEnvelope) => void,
    onEnd: (error: Error | undefined) => void,
  ): Subscription {
    const call: ClientReadableStream<RawEnvelope> = this.#client.makeServerStreamRequest(
      SUBSCRIBE,
      (request: { filters: string[] }) =>
        Buffer.from(T.SubscribeRequest.encode(T.SubscribeRequest.create(request)).finish()),
      (bytes: Buffer): RawEnvelope => {
        // An envelope that does not decode is passed on empty, to be reported, not thrown here.
        try {
          const e = T.Envelope.toObject(T.Envelope.decode(bytes), { defaults: true }) as {
            namespace: string;
            topic: string;
            event?: { type_url: string; value: Uint8Array };
          };
          return {
            namespace: e.namespace,
            topic: e.topic,
            typeUrl: e.event?.type_url ?? '',
            value: e.event?.value ?? new Uint8Array(),
          };
        } catch (error) {
          return {
            namespace: '',
            topic: '',
            typeUrl: `(undecodable envelope: ${error instanceof Error ? error.message : String(error)})`,
            value: new Uint8Array(),
          };
        }
      },
      { filters: [...filters] },
      new Metadata(),
    );
    let cancelled = false;
    let ended = false;
    const finish = (error: Error | undefined): void => {
      if (ended) return;
      ended = true;
      onEnd(cancelled ? undefined : (error ?? new Error('containerd ended the event stream')));
    };
    // containerd sends no answer headers until the first event, so "accepted" is: the connection
    // is up and the request went out on it (containerd registers the subscriber as it arrives).
    const ready = new Promise<void>((resolve, reject) => {
      this.#client.waitForReady(Date.now() + 10_000, (error) => (error ? reject(error) : resolve()));
      call.once('error', (error: Error) => reject(error));
      call.once('end', () => reject(new Error('containerd ended the event stream')));
    });
    ready.catch(() => undefined);
    call.on('data', onEnvelope);
    call.on('error', (error: Error & { code?: number }) =>
      finish(error.code === grpcStatus.CANCELLED && cancelled ? undefined : error),
    );
    call.on('end', () => finish(undefined));
    return {
      ready,
      cancel: () => {
        cancelled = true;
        call.cancel();
      },
    };
  }

  /** IDs of the containers in one namespace. */
  async listContainers(namespace: string, timeoutMs = 10_000): Promise<Set<string>> {
    return new Set((await this.containers(namespace, [], timeoutMs)).map((c) => c.id));
  }

  /**
   * The containers of one namespace that match any of `filters` (containerd's filter syntax), with
   * their labels and the bytes of their runtime spec.
   */
  containers(namespace: string, filters: readonly string[], timeoutMs = 10_000): Promise<ListedContainer[]> {
    const metadata = new Metadata();
    metadata.set(NAMESPACE_HEADER, namespace);
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        LIST_CONTAINERS,
        (request: { filters: string[] }) =>
          Buffer.from(T.ListContainersRequest.encode(T.ListContainersRequest.create(request)).finish()),
        (bytes: Buffer) =>
          T.ListContainersResponse.toObject(T.ListContainersResponse.decode(bytes), { defaults: true }) as {
            containers: ListedContainer[];
          },
        { filters: [...filters] },
        metadata,
        { deadline: Date.now() + timeoutMs },
        (error, response) => {
          if (error) reject(error);
          else resolve(response?.containers ?? []);
        },
      );
    });
  }

  close(): void {
    this.#client.close();
  }
}

/** Encodes one of the event messages Warren knows (for tests and tools). */
export function encodeMessage(
  message: 'ContainerDelete' | 'TaskExit' | 'TaskDelete',
  fields: Record<string, unknown>,
): Uint8Array {
  const t = T[message];
  return t.encode(t.fromObject(fields)).finish();
}

/** A google.protobuf.Any, as `containerd publish` reads it on stdin. */
export function encodeAny(typeUrl: string, value: Uint8Array): Buffer {
  const any = root.lookupType('warren.containerd.Any');
  return Buffer.from(any.encode(any.create({ type_url: typeUrl, value })).finish());
}
