/**
 * Events on the pod (or the Node), where operators look (`kubectl describe pod`, `kubectl get
 * events`): core/v1 Events reporting component `warren` and this node, sent through the agent's
 * client (sources/kubernetes/core-api.ts).
 *
 * Guarantees:
 * - never a storm: an Event repeated for one pod (same reason and message) within `aggregateMs` is
 *   one Event whose `count` and `lastTimestamp` are PATCHed; at most `burst` Events are sent at
 *   once and `perMinute` after that (a token bucket on the injected clock); what is over the limit
 *   is counted in `status()` and logged at debug, not queued without bound;
 * - an Event the API server refuses (403 missing permission, 422 invalid) is logged once per
 *   reason and never retried; any other failure is logged and the Event dropped — an Event is a
 *   report, never something the agent waits on;
 * - a 403 names the missing permission in `status()` and the log (e.g. "create events") until an
 *   Event is accepted with that verb again (the role was fixed: no restart needed). A 403 for a
 *   namespace being deleted (its Status cause `NamespaceTerminating`) is a refusal, not a missing
 *   permission.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { messageOf } from '../../core/errors.ts';
import { TokenBucketRateLimiter } from '../../core/rate-limited-queue.ts';
import { failureOfError, isNamespaceTerminating } from '../../sources/kubernetes/api-failure.ts';

/** What an Event is about: a pod (in its namespace) or a Node (Events about Nodes live in `default`). */
export interface Involved {
  readonly kind: 'Pod' | 'Node';
  readonly namespace: string;
  readonly name: string;
  readonly uid?: string;
}

export function podInvolved(pod: { uid: string; namespace: string; name: string }): Involved {
  return { kind: 'Pod', namespace: pod.namespace, name: pod.name, uid: pod.uid };
}

export function nodeInvolved(name: string, uid?: string): Involved {
  return { kind: 'Node', namespace: 'default', name, ...defined({ uid }) };
}

export const COMPONENT = 'warren';

/**
 * The two calls Events are sent with (sources/kubernetes/core-api.ts `CoreApi`): a create, and a
 * merge patch of an Event sent before; a failure is thrown as api-failure.ts reads it.
 */
export interface EventsApi {
  createNamespacedEvent(p: { namespace: string; body: object }): Promise<unknown>;
  patchNamespacedEvent(p: { name: string; namespace: string; body: object }): Promise<unknown>;
}

/** A core/v1 Event as sent (timestamps as RFC 3339 text, as the server stores them). */
interface EventObject {
  readonly apiVersion: 'v1';
  readonly kind: 'Event';
  readonly metadata: { readonly name: string; readonly namespace: string };
  readonly [field: string]: unknown;
}

export type EventType = 'Normal' | 'Warning';

/** The two verbs on events this module uses (and the ClusterRole grants). */
type EventVerb = 'create' | 'patch';

export interface ClusterEventsOptions {
  readonly api: EventsApi;
  readonly node: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Repeats within this window raise the count of one Event. Default 10 minutes. */
  readonly aggregateMs?: number;
  /** Events sent at once at most. Default 25. */
  readonly burst?: number;
  /** Events sent per minute once the burst is spent. Default 60. */
  readonly perMinute?: number;
}

export interface ClusterEventsStatus {
  readonly sent: number;
  readonly aggregated: number;
  readonly dropped: number;
  readonly refused: number;
  readonly forbidden?: string;
  readonly lastError?: string;
}

interface Sent {
  readonly namespace: string;
  readonly name: string;
  count: number;
  lastAt: number;
}

export class ClusterEvents {
  readonly #o: ClusterEventsOptions;
  readonly #aggregateMs: number;
  readonly #bucket: TokenBucketRateLimiter;
  readonly #recent = new Map<string, Sent>();
  #status: { sent: number; aggregated: number; dropped: number; refused: number; lastError?: string } = {
    sent: 0,
    aggregated: 0,
    dropped: 0,
    refused: 0,
  };
  /** The verbs the API server last refused for want of a permission, until one is accepted again. */
  readonly #forbidden = new Set<EventVerb>();
  readonly #refusalsLogged = new Set<string>();

  constructor(options: ClusterEventsOptions) {
    this.#o = options;
    this.#aggregateMs = options.aggregateMs ?? 10 * 60_000;
    this.#bucket = new TokenBucketRateLimiter({
      clock: options.clock,
      perSecond: (options.perMinute ?? 60) / 60,
      burst: options.burst ?? 25,
    });
  }

  /** Reports on the object; resolves once sent, aggregated or dropped (never rejects). */
  async record(about: Involved, type: EventType, reason: string, message: string): Promise<void> {
    const now = this.#o.clock.now();
    this.#prune(now);
    const key = `${about.kind}\u0000${about.namespace}\u0000${about.name}\u0000${about.uid ?? ''}\u0000${
      reason
    }\u0000${message}`;
    const earlier = this.#recent.get(key);
    const verb: EventVerb = earlier === undefined ? 'create' : 'patch';
    if (!this.#bucket.tryTake()) {
      this.#status.dropped += 1;
      this.#o.logger.debug(
        { about: `${about.kind} ${about.namespace}/${about.name}`, reason },
        'event over the rate limit; not sent',
      );
      return;
    }
    try {
      if (earlier !== undefined) {
        earlier.count += 1;
        earlier.lastAt = now;
        const body = { count: earlier.count, lastTimestamp: kubeTime(now) };
        await this.#o.api.patchNamespacedEvent({ name: earlier.name, namespace: earlier.namespace, body });
        this.#status.aggregated += 1;
      } else {
        const event = this.#event(about, type, reason, message, now);
        await this.#o.api.createNamespacedEvent({ namespace: about.namespace, body: event });
        this.#recent.set(key, { namespace: about.namespace, name: event.metadata?.name ?? '', count: 1, lastAt: now });
        this.#status.sent += 1;
      }
      // Accepted: whatever refusal of this verb was reported is over (the role was fixed).
      this.#forbidden.delete(verb);
    } catch (error) {
      this.#failed(error, reason, verb);
    }
  }

  status(): ClusterEventsStatus {
    const forbidden = [...this.#forbidden]
      .sort()
      .map((v) => `${v} events`)
      .join(', ');
    return { ...this.#status, ...(forbidden === '' ? {} : { forbidden }) };
  }

  #event(about: Involved, type: EventType, reason: string, message: string, now: number): EventObject {
    const at = new Date(now);
    return {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: {
        name: `${about.name}.${now.toString(16)}${Math.floor(Math.random() * 0x10000)
          .toString(16)
          .padStart(4, '0')}`,
        namespace: about.namespace,
      },
      involvedObject: {
        apiVersion: 'v1',
        kind: about.kind,
        namespace: about.namespace,
        name: about.name,
        ...defined({ uid: about.uid }),
      },
      reason,
      message,
      type,
      source: { component: COMPONENT, host: this.#o.node },
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
      reportingComponent: COMPONENT,
      reportingInstance: this.#o.node,
    };
  }

  #failed(error: unknown, reason: string, verb: EventVerb): void {
    const failure = failureOfError(error);
    const { code } = failure;
    const message = messageOf(error);
    this.#status.lastError = message;
    if (code === 403 || code === 422) {
      this.#status.refused += 1;
      // The API server answers 403 also for new content in a namespace being deleted (its
      // NamespaceLifecycle admission, which says so by a Status cause): the Event's pod is going
      // with it, and nothing is missing from the role.
      const missing = code === 403 && !isNamespaceTerminating(failure) ? `${verb} events` : undefined;
      if (missing !== undefined) this.#forbidden.add(verb);
      const key = `${code}:${missing ?? ''}:${reason}`;
      if (!this.#refusalsLogged.has(key)) {
        this.#refusalsLogged.add(key);
        this.#o.logger.warn(
          { code, reason, err: message, ...defined({ missingPermission: missing }) },
          missing !== undefined
            ? `the API server refused an Event: the service account may not ${missing}; not retried`
            : 'the API server refused an Event; not retried',
        );
      }
      return;
    }
    this.#status.dropped += 1;
    this.#o.logger.warn({ reason, err: message }, 'could not send an Event; dropped');
  }

  #prune(now: number): void {
    for (const [key, sent] of this.#recent) if (now - sent.lastAt > this.#aggregateMs) this.#recent.delete(key);
  }
}

/** A Kubernetes `Time`: RFC 3339 to the second, as the API server stores it. */
function kubeTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
