/**
 * The pods of this node (`fieldSelector=spec.nodeName=NODE`) as a source of releases: a
 * list-then-watch whose items are reduced to what a release needs (`PodFact`), and whose changes
 * are said the way releases think of them — a pod running (`pod`) or gone (`gone`, and why).
 *
 * Guarantees:
 * - a `listed` item carries every pod of the node as of that listing, the finished ones included
 *   (flagged `terminal`); it comes first and again after every relist, and what the consumer
 *   missed between two listings (a deletion while the watch was away) is found by comparing them;
 * - `gone` comes at most once per pod UID: on DELETED, or when the phase turns Succeeded or
 *   Failed — not again on the later MODIFIED events of a finished pod, nor on its DELETED; a pod a
 *   listing showed finished is the listing's to report;
 * - `pod` comes for every ADDED or MODIFIED pod that is not finished (a pod being deleted is still
 *   one: `deleting` says so, and its sandbox still runs);
 * - pods are told apart by UID only (a StatefulSet's new pod reuses the old one's name); a static
 *   pod shows through its mirror pod, whose `mirrorOf` is the static pod's UID (the annotation
 *   `kubernetes.io/config.mirror`). An object without a UID, namespace or name is logged and skipped.
 */
import type { KubeAccess } from '../../store/kubernetes/kube-access.ts';
import type { OnDemandClient, RequestAccounting } from './on-demand-client.ts';
import type { Logger } from 'pino';
import type { BackoffPolicy } from '../../core/backoff.ts';
import type { Clock } from '../../core/clock.ts';
import { isPlainObject } from '../../core/validate.ts';
import { ListWatch, type ListWatchItem, type ListWatchStatus } from './list-watch.ts';

export const MIRROR_ANNOTATION = 'kubernetes.io/config.mirror';

/** A pod, reduced to what a release needs. */
export interface PodFact {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  /** `status.phase` as the server says it (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`); '' when absent. */
  readonly phase: string;
  /** Succeeded or Failed: its containers are done and will not run again. */
  readonly terminal: boolean;
  /** `metadata.deletionTimestamp` is set: deletion is under way (the sandbox may still run). */
  readonly deleting: boolean;
  /** A mirror pod: the UID of the static pod it stands for. */
  readonly mirrorOf?: string;
}

export type PodGoneReason = 'deleted' | 'succeeded' | 'failed';

export type PodItem =
  /** Every pod of the node as of a listing (first, and after each relist). */
  | { readonly kind: 'listed'; readonly pods: ReadonlyMap<string, PodFact> }
  /** A pod added or changed that is not finished. */
  | { readonly kind: 'pod'; readonly pod: PodFact }
  /** A pod deleted, or finished; once per UID. */
  | { readonly kind: 'gone'; readonly pod: PodFact; readonly because: PodGoneReason };

export interface PodSourceStatus extends ListWatchStatus {
  readonly node: string;
  /** Pods of the node the API holds now, as last seen. */
  readonly pods: number;
  /** Objects skipped for want of a UID, namespace or name. */
  readonly malformed: number;
}

export interface PodSourceOptions {
  readonly kubeConfig: KubeAccess;
  /** The client to ask through (the agent's one); none: one of the kubeconfig's. */
  readonly client?: OnDemandClient | undefined;
  /** Where each request is counted, and the User-Agent it carries (on-demand-client.ts). */
  readonly accounting?: RequestAccounting | undefined;
  /** This node's name, as Kubernetes knows it (`spec.nodeName`). */
  readonly node: string;
  readonly clock: Clock;
  /** Between failed attempts. Default 1 s doubling to 30 s. */
  readonly backoff?: BackoffPolicy;
  readonly logger: Logger;
  /** The server's watch timeout (see ListWatchOptions). */
  readonly watchTimeoutSeconds?: number;
  /**
   * Shown every item of the watch as the server sent it, before it is reduced to PodFacts (the
   * agent's pod directory keeps the labels, annotations and owners an ADD plans with).
   */
  readonly observe?: (item: ListWatchItem<unknown>) => void;
}

/** The pod as it travels on the wire, as far as a PodFact reads it. */
interface WirePod {
  readonly metadata?: {
    readonly uid?: unknown;
    readonly namespace?: unknown;
    readonly name?: unknown;
    readonly resourceVersion?: string;
    readonly deletionTimestamp?: unknown;
    readonly annotations?: unknown;
  };
  readonly status?: { readonly phase?: unknown };
}

const nonEmpty = (value: unknown): value is string => typeof value === 'string' && value !== '';

/** The PodFact of a pod object, or undefined when it lacks a UID, namespace or name. */
export function podFactOf(object: unknown): PodFact | undefined {
  const pod = object as WirePod | null;
  const meta = pod?.metadata;
  if (!nonEmpty(meta?.uid) || !nonEmpty(meta.namespace) || !nonEmpty(meta.name)) return undefined;
  const phase = typeof pod?.status?.phase === 'string' ? pod.status.phase : '';
  const annotations = isPlainObject(meta.annotations) ? meta.annotations : {};
  const mirror = annotations[MIRROR_ANNOTATION];
  return {
    uid: meta.uid,
    namespace: meta.namespace,
    name: meta.name,
    phase,
    terminal: phase === 'Succeeded' || phase === 'Failed',
    deleting: meta.deletionTimestamp !== undefined && meta.deletionTimestamp !== null,
    ...(nonEmpty(mirror) ? { mirrorOf: mirror } : {}),
  };
}

export class PodSource {
  readonly #o: PodSourceOptions;
  readonly #lw: ListWatch<WirePod>;
  /** The node's pods as last seen, by UID. */
  #live = new Map<string, PodFact>();
  /** UIDs whose `gone` was said (or whose finish a listing showed): never said twice. */
  #reported = new Set<string>();
  #malformed = 0;

  constructor(options: PodSourceOptions) {
    this.#o = options;
    this.#lw = new ListWatch<WirePod>({
      kubeConfig: options.kubeConfig,
      client: options.client,
      accounting: options.accounting,
      path: '/api/v1/pods',
      fieldSelector: `spec.nodeName=${options.node}`,
      clock: options.clock,
      logger: options.logger,
      backoff: options.backoff,
      watchTimeoutSeconds: options.watchTimeoutSeconds,
    });
  }

  /** Listings and pod changes until `signal` aborts. Iterated once. */
  async *events(signal: AbortSignal): AsyncGenerator<PodItem> {
    for await (const item of this.#lw.events(signal)) {
      this.#o.observe?.(item);
      switch (item.kind) {
        case 'listed': {
          const pods = new Map<string, PodFact>();
          for (const object of item.objects) {
            const fact = this.#fact(object);
            if (fact !== undefined) pods.set(fact.uid, fact);
          }
          this.#live = new Map(pods);
          this.#reported = new Set([...pods.values()].filter((p) => p.terminal).map((p) => p.uid));
          yield { kind: 'listed', pods };
          break;
        }
        case 'added':
        case 'modified': {
          const pod = this.#fact(item.object);
          if (pod === undefined) break;
          this.#live.set(pod.uid, pod);
          if (!pod.terminal) yield { kind: 'pod', pod };
          else if (!this.#reported.has(pod.uid)) {
            this.#reported.add(pod.uid);
            yield { kind: 'gone', pod, because: pod.phase === 'Succeeded' ? 'succeeded' : 'failed' };
          }
          break;
        }
        case 'deleted': {
          const pod = this.#fact(item.object);
          if (pod === undefined) break;
          this.#live.delete(pod.uid);
          const said = this.#reported.delete(pod.uid);
          if (!said) yield { kind: 'gone', pod, because: 'deleted' };
          break;
        }
        default: {
          const never: never = item;
          throw new Error(`unhandled list-watch item ${JSON.stringify(never)}`);
        }
      }
    }
  }

  /**
   * The node's pods the API holds, as of the last item handed to the consumer (finished ones
   * included, until deleted). Kept current by `events`: empty before the first listing.
   */
  live(): ReadonlyMap<string, PodFact> {
    return this.#live;
  }

  status(): PodSourceStatus {
    return { ...this.#lw.status(), node: this.#o.node, pods: this.#live.size, malformed: this.#malformed };
  }

  #fact(object: WirePod): PodFact | undefined {
    const fact = podFactOf(object);
    if (fact === undefined) {
      this.#malformed += 1;
      this.#o.logger.warn(
        { node: this.#o.node, metadata: object?.metadata },
        'kubernetes: a pod without uid, namespace or name skipped',
      );
    }
    return fact;
  }
}
