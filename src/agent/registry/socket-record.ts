/**
 * What the registry's reconciler knows of one socket, for one generation (file) of it, and how
 * `warren plugins` shows it: its state, when it is to be asked again, its failures, and what its
 * handler reports once it is registered.
 *
 * Guarantees: a record starts registering, with no failures, to be asked now; a backoff timer
 * outlives no wake (`setWake` cancels the one it replaces), so a socket refused, waiting for a
 * name, or forgotten since is not poked by a retry it no longer has.
 */
import type { CancelTimer } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import type { PluginInfo } from '../../api/plugins/wire.ts';
import type { PluginEntry, PluginState } from '../../api/status.ts';
import type { ActualPlugin } from './actual-state.ts';

/** When a socket is to be asked again. */
export type Wake =
  /** At its next run. */
  | { readonly kind: 'now' }
  /** Once the backoff after a failure is over (a timer pokes it then). */
  /** `at`: ms since the epoch, for status; `due`: the same instant on the monotonic clock, which decides. */
  | { readonly kind: 'at'; readonly at: number; readonly due: number; readonly cancel: CancelTimer }
  /** Refused: only once the socket is replaced (a new record). */
  | { readonly kind: 'replaced' }
  /** Its name is held by another socket: once that socket lets it go. */
  | { readonly kind: 'released'; readonly claim: string };

/** What the reconciler knows of one socket, for one generation (file) of it. */
export interface SocketRecord {
  readonly socket: string;
  readonly generation: number;
  /** The socket's inode, for the actual state. */
  readonly ino: number;
  state: PluginState;
  since: number;
  wake: Wake;
  failures: number;
  error: string | undefined;
  info: PluginInfo | undefined;
}

/** The record of a socket's file (`desired`: its generation and inode) when first seen. */
export function newRecord(
  socket: string,
  desired: { readonly generation: number; readonly ino: number },
  now: number,
): SocketRecord {
  const { generation, ino } = desired;
  return {
    socket,
    generation,
    ino,
    state: 'registering',
    since: now,
    wake: { kind: 'now' },
    failures: 0,
    error: undefined,
    info: undefined,
  };
}

/** Sets when the socket is to be asked again; the backoff timer of the wake it replaces is cancelled. */
export function setWake(record: SocketRecord, wake: Wake): void {
  if (record.wake.kind === 'at') record.wake.cancel();
  record.wake = wake;
}

/** A record as an entry of the registry's status; `registered` when its plugin is registered now. */
export function entryOf(record: SocketRecord, registered: ActualPlugin | undefined): PluginEntry {
  const { socket, info } = record;
  let detail: Readonly<Record<string, unknown>> | undefined;
  if (registered !== undefined && registered.handler.describe !== undefined) {
    try {
      detail = registered.handler.describe(registered.plugin);
    } catch (error) {
      detail = { error: `describe failed: ${messageOf(error)}` };
    }
  }
  return {
    socket,
    state: record.state,
    ...(info === undefined ? {} : { type: info.type, name: info.name }),
    ...(registered === undefined ? {} : { endpoint: registered.plugin.endpoint, version: registered.plugin.version }),
    since: new Date(record.since).toISOString(),
    ...defined({ error: record.error }),
    failures: record.failures,
    ...(record.wake.kind === 'at' ? { retryAt: new Date(record.wake.at).toISOString() } : {}),
    ...defined({ detail }),
  };
}
