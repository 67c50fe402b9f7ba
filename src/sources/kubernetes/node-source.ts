/**
 * The cluster's Nodes, by name: a list-then-watch of `/api/v1/nodes` reduced to which nodes exist.
 * With the etcd store, a node deleted from Kubernetes (and whose announcement expired) has its
 * blocks and allocations forgotten by one elected agent; this source says when a node goes.
 *
 * Guarantees: a `listed` item carries every node's name as of a listing (first, and after every
 * relist: a node deleted while the watch was away is missing from it); `node-added` and
 * `node-deleted` come once per appearance and disappearance of a name between listings; changes to
 * a node that stays (status, labels) say nothing. Objects without a name are skipped.
 */
import type { KubeAccess } from '../../store/kubernetes/kube-access.ts';
import type { OnDemandClient, RequestAccounting } from './on-demand-client.ts';
import type { Logger } from 'pino';
import type { BackoffPolicy } from '../../core/backoff.ts';
import type { Clock } from '../../core/clock.ts';
import { ListWatch, type ListWatchStatus } from './list-watch.ts';

export type NodeItem =
  /** Every node's name as of a listing (first, and after each relist). */
  | { readonly kind: 'listed'; readonly names: ReadonlySet<string> }
  | { readonly kind: 'node-added'; readonly name: string }
  | { readonly kind: 'node-deleted'; readonly name: string };

export interface NodeSourceStatus extends ListWatchStatus {
  /** Nodes the API holds now, as last seen. */
  readonly nodes: number;
}

export interface NodeSourceOptions {
  readonly kubeConfig: KubeAccess;
  /** The client to ask through (the agent's one); none: one of the kubeconfig's. */
  readonly client?: OnDemandClient | undefined;
  /** Where each request is counted, and the User-Agent it carries (on-demand-client.ts). */
  readonly accounting?: RequestAccounting | undefined;
  readonly clock: Clock;
  /** Between failed attempts. Default 1 s doubling to 30 s. */
  readonly backoff?: BackoffPolicy;
  readonly logger: Logger;
  /** The server's watch timeout (see ListWatchOptions). */
  readonly watchTimeoutSeconds?: number;
}

interface WireNode {
  readonly metadata?: { readonly name?: unknown; readonly resourceVersion?: string };
}

function nameOf(node: WireNode): string | undefined {
  const name = node?.metadata?.name;
  return typeof name === 'string' && name !== '' ? name : undefined;
}

export class NodeSource {
  readonly #lw: ListWatch<WireNode>;
  /** The names of the nodes as last seen. */
  #names = new Set<string>();

  constructor(options: NodeSourceOptions) {
    this.#lw = new ListWatch<WireNode>({
      kubeConfig: options.kubeConfig,
      client: options.client,
      accounting: options.accounting,
      path: '/api/v1/nodes',
      clock: options.clock,
      logger: options.logger,
      backoff: options.backoff,
      watchTimeoutSeconds: options.watchTimeoutSeconds,
    });
  }

  /** Listings, node additions and deletions until `signal` aborts. Iterated once. */
  async *events(signal: AbortSignal): AsyncGenerator<NodeItem> {
    for await (const item of this.#lw.events(signal)) {
      switch (item.kind) {
        case 'listed': {
          const names = new Set<string>();
          for (const node of item.objects) {
            const name = nameOf(node);
            if (name !== undefined) names.add(name);
          }
          this.#names = new Set(names);
          yield { kind: 'listed', names };
          break;
        }
        case 'added':
        case 'modified': {
          const name = nameOf(item.object);
          if (name === undefined || this.#names.has(name)) break;
          this.#names.add(name);
          yield { kind: 'node-added', name };
          break;
        }
        case 'deleted': {
          const name = nameOf(item.object);
          if (name === undefined || !this.#names.delete(name)) break;
          yield { kind: 'node-deleted', name };
          break;
        }
        default: {
          const never: never = item;
          throw new Error(`unhandled list-watch item ${JSON.stringify(never)}`);
        }
      }
    }
  }

  /** The names of the nodes the API holds now, as last seen. */
  names(): ReadonlySet<string> {
    return this.#names;
  }

  status(): NodeSourceStatus {
    return { ...this.#lw.status(), nodes: this.#names.size };
  }
}
