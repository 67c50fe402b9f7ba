/**
 * The consumers of the runtime's sources, which feed the release pipeline: the sources yield their
 * own items (containerd's events and resyncs, a registered runtime adapter's, a netns directory's
 * removals), and these loops turn them into release intents — an event into one intent, a resync
 * into the intents the pipeline derives from it (acknowledged to the source only once queued), a
 * removal into a look again at every exited container (and waiting pod). Each loop runs until its
 * source ends (its signal aborted). The journal has its own consumer (release/journal.ts), since
 * it also keeps files and reports.
 */
import type { Clock } from '../../core/clock.ts';
import { type Moment, momentOf } from '../../core/moment.ts';
import type { ContainerEvent } from '../../sources/containerd/client.ts';
import type { ContainerdItem } from '../../sources/containerd/event-source.ts';
import type { NetnsRemoval } from '../../sources/netns-removals.ts';
import type { RuntimeEvent } from '../../api/plugins/wire.ts';
import type { RuntimeItem } from '../../sources/plugins/event-source-client.ts';
import type { ReleasePipeline } from './pipeline.ts';
import type { ReleaseIntent, RuntimeAdapterScope } from './intent.ts';
import type { NetnsScopes } from './netns-scopes.ts';

/** The intent a containerd event seen at `observedAt` stands for. */
export function containerIntent(event: ContainerEvent, observedAt: Moment): ReleaseIntent {
  switch (event.kind) {
    case 'container-delete':
      return { kind: 'container-deleted', containerID: event.containerID, observedAt };
    case 'task-exit':
    case 'task-delete':
      return { kind: 'task-exited', containerID: event.containerID, event: event.kind, observedAt };
    default: {
      const never: never = event;
      throw new Error(`unhandled container event ${JSON.stringify(never)}`);
    }
  }
}

/** `clock` stamps each event when it arrives: its intent never releases what was allocated later. */
export async function consumeContainerd(
  items: AsyncIterable<ContainerdItem>,
  pipeline: ReleasePipeline,
  clock: Clock,
): Promise<void> {
  for await (const item of items) {
    switch (item.kind) {
      case 'event':
        pipeline.push(containerIntent(item.event, momentOf(clock)));
        break;
      case 'resync':
        // Awaited: events after the resync are queued after the intents it gives.
        try {
          await pipeline.resync(item.live);
          item.ack();
        } catch (error) {
          item.ack(error ?? new Error('the resync failed'));
        }
        break;
      default: {
        const never: never = item;
        throw new Error(`unhandled containerd item ${JSON.stringify(never)}`);
      }
    }
  }
}

/**
 * The intent an adapter's event seen at `observedAt` stands for, judged only over what the adapter
 * answers for; a creation releases nothing.
 */
export function runtimeIntent(
  event: RuntimeEvent,
  via: RuntimeAdapterScope,
  observedAt: Moment,
): ReleaseIntent | undefined {
  switch (event.kind) {
    case 'created':
      return undefined;
    case 'exited':
      return { kind: 'task-exited', containerID: event.id, event: 'task-exit', observedAt, via };
    case 'deleted':
      return { kind: 'container-deleted', containerID: event.id, observedAt, via };
    default: {
      const never: never = event.kind;
      throw new Error(`unhandled runtime event ${JSON.stringify(never)}`);
    }
  }
}

/**
 * A runtime adapter's stream into the pipeline. What it answers for comes with each listing (the
 * client yields a listing first after every (re)opened stream), so an event is never judged
 * before its adapter has said which allocations are its own; a listing that declares another
 * runtime's namespaces (`scopes`) is refused, and neither it nor the stream's events are applied.
 */
export async function consumeRuntimeAdapter(
  adapter: string,
  items: AsyncIterable<RuntimeItem>,
  pipeline: ReleasePipeline,
  scopes: NetnsScopes,
  clock: Clock,
): Promise<void> {
  let via: RuntimeAdapterScope | undefined;
  for await (const item of items) {
    switch (item.kind) {
      case 'resync': {
        const refused = scopes.claim(adapter, item.listing.netnsPrefixes);
        if (refused !== undefined) {
          via = undefined;
          item.ack(new Error(refused));
          break;
        }
        via = { adapter, netnsPrefixes: item.listing.netnsPrefixes };
        try {
          await pipeline.resync(new Set(item.listing.ids), via);
          item.ack();
        } catch (error) {
          item.ack(error ?? new Error('the resync failed'));
        }
        break;
      }
      case 'event': {
        if (via === undefined) break;
        const intent = runtimeIntent(item.event, via, momentOf(clock));
        if (intent !== undefined) pipeline.push(intent);
        break;
      }
      default: {
        const never: never = item;
        throw new Error(`unhandled runtime adapter item ${JSON.stringify(never)}`);
      }
    }
  }
}

export async function consumeNetnsRemovals(removals: AsyncIterable<NetnsRemoval>, removed: () => void): Promise<void> {
  for await (const _removal of removals) {
    // Which namespace went is not needed: the rule looks at each waiting container's or pod's own.
    removed();
  }
}
