/**
 * `ClusterRecords.watchRequests` on the Kubernetes API: the WarrenAddressRequests of a scope
 * (store/cluster.ts RequestScope) kept by a KubeCollectionWatch (collection-watch.ts: listed once,
 * watched from the version reached, listed again only on 410 Gone), selected on the server by the
 * labels requests carry (objects.ts requestLabels):
 * - the open requests of a set of ranges: `warren.dev/open=true,warren.dev/range in (a,b)`, so a
 *   lender is told of the requests addressed to the ranges it holds blocks of, and of no other;
 * - the requests lent to by a node: `lender.warren.dev/<node>=true`;
 * - the requests of a node: `warren.dev/node=<node>`.
 *
 * Guarantees:
 * - one watch per scope however many views of it are open; none once every view of it is closed,
 *   and none after `close`;
 * - a request is in a view only if it is in its scope as read (a label that matched by a cut
 *   label value's collision is not enough): one that is not is left out, as if not selected;
 * - a view's listener is told each request that entered, changed in or left its scope, once, as the
 *   watch tells it (across a listing again after 410 too: collection-watch.ts).
 */
import type { Clock } from '../../core/clock.ts';
import {
  type AddressRequest,
  type RecordView,
  type RequestChange,
  type RequestScope,
  inRequestScope,
} from '../cluster.ts';
import { KubeCollectionWatch } from './collection-watch.ts';
import { NODE_LABEL, OPEN_LABEL, RANGE_LABEL, labelValue, lenderLabel } from './names.ts';
import { requestOf } from './objects.ts';
import type { Resource } from './resources.ts';

interface Shared {
  readonly watch: KubeCollectionWatch<AddressRequest>;
  views: number;
}

/** The label selector of `scope`, and what a request must be to be in it. */
function selectionOf(scope: RequestScope): { selector: string; what: string } {
  if ('open' in scope) {
    const values = [...new Set(scope.open.map(labelValue))].sort();
    return {
      selector: `${OPEN_LABEL}=true,${RANGE_LABEL} in (${values.join(',')})`,
      what: `open address requests of ${values.length} range(s)`,
    };
  }
  if ('lentBy' in scope)
    return { selector: `${lenderLabel(scope.lentBy)}=true`, what: `requests lent to by ${scope.lentBy}` };
  return { selector: `${NODE_LABEL}=${labelValue(scope.node)}`, what: `address requests of node ${scope.node}` };
}

export class KubeRequestViews {
  readonly #requests: Resource;
  readonly #clock: Clock;
  /** The watches open, by label selector. */
  readonly #watches = new Map<string, Shared>();
  #closed = false;

  constructor(requests: Resource, clock: Clock) {
    this.#requests = requests;
    this.#clock = clock;
  }

  /** A view of `scope` (see the header); an empty set of ranges is a view of nothing, with no watch. */
  view(scope: RequestScope, listener?: (change: RequestChange) => void): RecordView<AddressRequest> {
    if (this.#closed || ('open' in scope && scope.open.length === 0)) return emptyView();
    const { selector, what } = selectionOf(scope);
    const shared = this.#watches.get(selector) ?? this.#open(selector, what, (r) => inRequestScope(scope, r));
    shared.views += 1;
    const unlisten =
      listener === undefined
        ? () => {}
        : shared.watch.listen((change) =>
            listener(
              change.type === 'deleted'
                ? { request: change.previous, gone: true }
                : { request: change.value, gone: false },
            ),
          );
    let open = true;
    return {
      get synced() {
        return open && shared.watch.isSynced;
      },
      values: () => (open ? shared.watch.values() : []),
      close: () => {
        if (!open) return;
        open = false;
        unlisten();
        shared.views -= 1;
        if (shared.views === 0 && this.#watches.get(selector) === shared) {
          this.#watches.delete(selector);
          shared.watch.close();
        }
      },
    };
  }

  #open(selector: string, what: string, inScope: (r: AddressRequest) => boolean): Shared {
    const watch = new KubeCollectionWatch<AddressRequest>({
      resource: this.#requests,
      what,
      selectors: { labelSelector: selector },
      decode: (object) => {
        const request = requestOf(object);
        return request !== undefined && inScope(request) ? request : undefined;
      },
      clock: this.#clock,
    });
    const shared = { watch, views: 0 };
    this.#watches.set(selector, shared);
    watch.start();
    return shared;
  }

  close(): void {
    this.#closed = true;
    for (const { watch } of this.#watches.values()) watch.close();
    this.#watches.clear();
  }
}

/** A view of nothing, synced at once: a scope no request can be in. */
export function emptyView<T>(): RecordView<T> {
  return { synced: true, values: () => [], close: () => {} };
}
