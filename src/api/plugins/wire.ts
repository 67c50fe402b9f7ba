/**
 * The plugin registry's wire: kubelet's registration handshake (registration.proto) and Warren's
 * `warren.event-source` v1 service (event-source.proto), as TypeScript shapes, gRPC method paths and
 * protobuf codecs shared by the agent (which calls plugins) and the adapters Warren ships (which
 * serve them). Messages are read with protobufjs from the .proto files beside this one.
 *
 * Decoding is strict where it matters and never throws past its caller's guard: `decodeInfo` and
 * the event-source decoder in event-codec.ts return what is wrong as text, so one bad message from a
 * plugin is reported, not fatal.
 */
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const load = (file: string): protobuf.Root =>
  new protobuf.Root().loadSync(fileURLToPath(new URL(file, import.meta.url)), { keepCase: true });
const registration = load('./registration.proto');
const eventSource = load('./event-source.proto');

/** The message types, for encoding and decoding. */
export const MESSAGES = {
  InfoRequest: registration.lookupType('pluginregistration.InfoRequest'),
  PluginInfo: registration.lookupType('pluginregistration.PluginInfo'),
  RegistrationStatus: registration.lookupType('pluginregistration.RegistrationStatus'),
  RegistrationStatusResponse: registration.lookupType('pluginregistration.RegistrationStatusResponse'),
  Event: eventSource.lookupType('warren.eventsource.v1.Event'),
  WatchRequest: eventSource.lookupType('warren.eventsource.v1.WatchRequest'),
  ListRequest: eventSource.lookupType('warren.eventsource.v1.ListRequest'),
  ListResponse: eventSource.lookupType('warren.eventsource.v1.ListResponse'),
} as const;

/** The Kind enum's numbers (event-source.proto). */
export const EVENT_KIND = { KIND_UNSPECIFIED: 0, CREATED: 1, EXITED: 2, DELETED: 3, HEARTBEAT: 4 } as const;

export const METHODS = {
  getInfo: '/pluginregistration.Registration/GetInfo',
  notifyRegistrationStatus: '/pluginregistration.Registration/NotifyRegistrationStatus',
  watch: '/warren.eventsource.v1.EventSource/Watch',
  list: '/warren.eventsource.v1.EventSource/List',
} as const;

/** The plugin type Warren registers runtime adapters under, and the versions of it Warren speaks. */
export const EVENT_SOURCE_TYPE = 'warren.event-source';
export const EVENT_SOURCE_VERSIONS: readonly string[] = ['v1'];

export interface PluginInfo {
  readonly type: string;
  readonly name: string;
  /** Empty: the registration socket itself. */
  readonly endpoint: string;
  readonly supportedVersions: readonly string[];
}

export interface RegistrationStatus {
  readonly registered: boolean;
  /** Empty when registered. */
  readonly error: string;
}

/** One lifecycle event as an adapter reports it (HEARTBEAT never reaches a consumer). */
export interface RuntimeEvent {
  readonly id: string;
  readonly kind: 'created' | 'exited' | 'deleted';
  /** Absolute path, when the adapter knows it. */
  readonly netns?: string;
  /** Milliseconds since the epoch. */
  readonly time: number;
}

/** An adapter's answer to List. */
export interface RuntimeListing {
  readonly ids: readonly string[];
  readonly netnsPrefixes: readonly string[];
}

export function encode(type: protobuf.Type, value: Record<string, unknown>): Buffer {
  return Buffer.from(type.encode(type.fromObject(value)).finish());
}

/**
 * Decodes a message, throwing when the bytes are not one. The bytes are read through a plain
 * Uint8Array view: protobufjs reads a Node Buffer with a reader that cuts a string field running
 * past the end short instead of refusing it, so a truncated message would pass as a shorter one.
 */
export function decodeMessage(type: protobuf.Type, bytes: Uint8Array): protobuf.Message {
  return type.decode(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}

function decodeObject(type: protobuf.Type, bytes: Uint8Array): Record<string, unknown> {
  return type.toObject(decodeMessage(type, bytes), { defaults: true, longs: Number, enums: Number }) as Record<
    string,
    unknown
  >;
}

export function encodeInfo(info: PluginInfo): Buffer {
  return encode(MESSAGES.PluginInfo, {
    type: info.type,
    name: info.name,
    endpoint: info.endpoint,
    supported_versions: [...info.supportedVersions],
  });
}

/** A PluginInfo as sent, or what is wrong with the bytes. Checks shape only; the registry validates meaning. */
export function decodeInfo(bytes: Uint8Array): PluginInfo | string {
  try {
    const m = decodeObject(MESSAGES.PluginInfo, bytes);
    return {
      type: String(m.type),
      name: String(m.name),
      endpoint: String(m.endpoint),
      supportedVersions: (m.supported_versions as unknown[]).map(String),
    };
  } catch (error) {
    return `PluginInfo does not decode: ${error instanceof Error ? error.message : String(error)}`;
  }
}

export function encodeStatus(status: RegistrationStatus): Buffer {
  return encode(MESSAGES.RegistrationStatus, { plugin_registered: status.registered, error: status.error });
}

export function decodeStatus(bytes: Uint8Array): RegistrationStatus | string {
  try {
    const m = decodeObject(MESSAGES.RegistrationStatus, bytes);
    return { registered: Boolean(m.plugin_registered), error: String(m.error) };
  } catch (error) {
    return `RegistrationStatus does not decode: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** Decodes an empty (or any) message's bytes; only its framing matters. */
export const EMPTY = Buffer.alloc(0);
