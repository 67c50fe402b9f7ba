/**
 * A window's requests as the nodes themselves counted them: each simulated node's ApiRequestCounter
 * (src/store/kubernetes/api-requests.ts: one count per request that left, by verb, resource and
 * outcome, as an audit log names them) read at the window's start and end. This is how the harness
 * counts against an API server that keeps no per-client counts it can read (`--kubeconfig`, a real
 * kube-apiserver); against the fake the same arithmetic reads the fake's own records instead.
 *
 * Guarantees: the difference of two readings per node, turned into request records of the shape
 * the window's arithmetic (window-counts.ts) reads, one per request, the outcome class as its status
 * (`2xx` as 200, `404` as 404, `4xx` as 400, `unreachable` as 0); a node that stopped in the window
 * keeps what it counted before it stopped. What the counters cannot say is not made up: no watch
 * event is counted (a watch counts once, when opened), so the fan-out shows the changes only.
 */
import type { ApiOutcome, ApiRequestCounter } from '../../src/store/kubernetes/api-requests.ts';
import type { CountedRequest } from './fake-control.ts';

/** A node as its own counter sees it. */
export interface CountingNode {
  readonly name: string;
  readonly kubeRequests: Pick<ApiRequestCounter, 'totals'>;
}

type Reading = Map<string, number>;

const keyOf = (verb: string, resource: string, code: ApiOutcome): string => `${verb} ${resource} ${code}`;

function read(counter: Pick<ApiRequestCounter, 'totals'>): Reading {
  return new Map(counter.totals().map((t) => [keyOf(t.verb, t.resource, t.code), t.count]));
}

function statusOf(code: string): number {
  if (code === 'unreachable') return 0;
  const exact = Number(code);
  return Number.isInteger(exact) ? exact : Number(code[0]) * 100;
}

/** Every request the nodes counted, over all nodes (what a settle watches move). */
export function countedSoFar(nodes: readonly CountingNode[]): number {
  let all = 0;
  for (const node of nodes) for (const t of node.kubeRequests.totals()) all += t.count;
  return all;
}

export class ClientCountWindow {
  /** Each node's reading at the start, by the node (a node re-joined under a name is another node). */
  readonly #start = new Map<CountingNode, Reading>();
  readonly #nodes: readonly CountingNode[];

  /** Reads every node's counter now: the window begins. */
  constructor(nodes: readonly CountingNode[]) {
    this.#nodes = [...nodes];
    for (const node of nodes) this.#start.set(node, read(node.kubeRequests));
  }

  /**
   * The requests each node counted since the window began: the nodes read then, and `joined`
   * (nodes started since, whose every count is the window's).
   */
  requests(joined: readonly CountingNode[] = []): CountedRequest[] {
    const records: CountedRequest[] = [];
    for (const node of new Set([...this.#nodes, ...joined])) {
      const before = this.#start.get(node) ?? new Map<string, number>();
      for (const [key, count] of read(node.kubeRequests)) {
        const [verb, resource, code] = key.split(' ') as [string, string, string];
        const record = {
          client: node.name,
          verb: verb as CountedRequest['verb'],
          method: '',
          resource,
          path: '',
          status: statusOf(code),
        };
        for (let n = before.get(key) ?? 0; n < count; n++) records.push(record);
      }
    }
    return records;
  }
}
