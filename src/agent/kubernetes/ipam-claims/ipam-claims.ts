/**
 * KubeVirt VMs through the IPAMClaim standard, assembled: the claim cache fed by a list-watch of
 * every namespace's IPAMClaims, the "ipamclaims" ADD planner over it, the status writer told of
 * each ADD that took a claim's addresses, and the upkeep that ends a deleted claim's holding.
 * The parts say what they guarantee (claim-*.ts); this module only joins them and says how the
 * holdings are reached from the agent's store (`storeClaimHoldings`).
 *
 * The watch starts once the API server serves IPAMClaims (its discovery document says so): a
 * cluster without KubeVirt's CRD is asked again every `recheckMs` (default 5 min, on the injected
 * clock; a PeriodicTask that asks at once, then an interval after each answer or failure), not
 * hammered with failing listings. Until then an ADD naming a claim reads it with a GET,
 * which says the CRD is missing (code 7).
 */
import type { Logger } from 'pino';
import type { BackoffPolicy } from '../../../core/backoff.ts';
import type { Clock } from '../../../core/clock.ts';
import { defined } from '../../../core/defined.ts';
import { isWarrenError, messageOf } from '../../../core/errors.ts';
import { PeriodicTask } from '../../../core/periodic-task.ts';
import type { OnDemandClient } from '../../../sources/kubernetes/on-demand-client.ts';
import type { KubeAccess } from '../../../store/kubernetes/kube-access.ts';
import type { IpamClaimsReport } from '../../../api/status.ts';
import { ListWatch } from '../../../sources/kubernetes/list-watch.ts';
import type { Store } from '../../../store/store.ts';
import { HELD_NETWORK, type Holdings, placeholderOwner } from '../../../allocator/holdings/holdings.ts';
import type { AddOutcome, AddPlanner } from '../../server/add-plan.ts';
import type { ClaimApi } from './claim-api.ts';
import { ClaimCache, type ClaimRef, IPAMCLAIMS_PATH } from './claim-cache.ts';
import { type ClaimPlannerOptions, claimOfHolding, ipamClaimPlanner } from './claim-planner.ts';
import { ClaimStatusWriter } from './claim-status.ts';
import { type ClaimHoldings, ClaimUpkeep } from './claim-upkeep.ts';

export interface IpamClaimsOptions {
  readonly kubeConfig: KubeAccess;
  /** The client the claims' watch asks through (the agent's one); none: one of the kubeconfig's. */
  readonly client?: OnDemandClient | undefined;
  readonly api: Pick<ClaimApi, 'get' | 'patchStatus' | 'served'>;
  /** The pod an ADD is for, from the agent's pod watch (PodDirectory.pod). */
  readonly pod: ClaimPlannerOptions['pod'];
  readonly holdings: ClaimHoldings;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly backoff?: BackoffPolicy;
  /** The server's watch timeout (ListWatchOptions). */
  readonly watchTimeoutSeconds?: number;
  /** How often a server not serving IPAMClaims is asked again, ms. Default 5 minutes. */
  readonly recheckMs?: number;
}

const DEFAULT_RECHECK_MS = 5 * 60_000;

export class IpamClaims {
  readonly cache: ClaimCache;
  /** The "ipamclaims" planner: runs among the holdings planners (add-plan.ts). */
  readonly planner: AddPlanner;
  /** The planners it adds, in order (after pools and addresses: add-plan.ts). */
  readonly planners: readonly AddPlanner[];
  readonly #watch: ListWatch<{ metadata?: { resourceVersion?: string } }>;
  readonly #writer: ClaimStatusWriter;
  readonly #upkeep: ClaimUpkeep;
  readonly #o: IpamClaimsOptions;
  readonly #logger: Logger;
  /** Asks whether IPAMClaims are served until they are. */
  readonly #servedCheck: PeriodicTask<void>;
  /** Aborted once they are: the check stops and the watch starts. */
  readonly #servedFound = new AbortController();
  #served: boolean | undefined;

  constructor(o: IpamClaimsOptions) {
    const logger = o.logger.child({ part: 'ipamclaims' });
    this.#o = o;
    this.#logger = logger;
    this.cache = new ClaimCache({ fetchClaim: (ref) => o.api.get(ref) });
    this.planner = ipamClaimPlanner({ pod: o.pod, claim: (ref) => this.cache.claim(ref) });
    this.planners = [this.planner];
    this.#watch = new ListWatch({
      kubeConfig: o.kubeConfig,
      client: o.client,
      path: IPAMCLAIMS_PATH,
      clock: o.clock,
      logger,
      backoff: o.backoff,
      watchTimeoutSeconds: o.watchTimeoutSeconds,
    });
    this.#writer = new ClaimStatusWriter({
      peek: (ref) => this.cache.peek(ref),
      patchStatus: (ref, status) => o.api.patchStatus(ref, status),
      clock: o.clock,
      logger,
    });
    this.#upkeep = new ClaimUpkeep({
      cache: this.cache,
      exists: (ref) => claimExists(o.api, ref),
      holdings: o.holdings,
      clock: o.clock,
      logger,
    });
    this.#servedCheck = new PeriodicTask({
      clock: o.clock,
      intervalMs: o.recheckMs ?? DEFAULT_RECHECK_MS,
      runAtStart: true,
      run: () => this.#askServed(),
      onError: (error) =>
        logger.warn({ err: messageOf(error) }, 'ipamclaims: could not tell whether IPAMClaims are served'),
    });
  }

  /** Told of each ADD (CniService's afterAdd): one that took a claim's addresses is written to its status. */
  readonly afterAdd = (outcome: AddOutcome): void => {
    const ref = claimOfHolding(outcome.plan.holding);
    if (ref === undefined || outcome.pod === undefined) return;
    this.#writer.want(ref, { ips: outcome.ips, ownerPod: outcome.pod.name });
  };

  /** Watches the claims (once served), writes statuses and ends holdings until the signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    await Promise.all([this.#writer.run(signal), this.#watchOnceServed(signal)]);
  }

  async #watchOnceServed(signal: AbortSignal): Promise<void> {
    await this.#servedCheck.runUntil(AbortSignal.any([signal, this.#servedFound.signal]));
    if (this.#served === true && !signal.aborted) await this.#upkeep.run(this.#watch.events(signal), signal);
  }

  async #askServed(): Promise<void> {
    this.#served = await this.#o.api.served();
    if (this.#served) this.#servedFound.abort();
    else
      this.#logger.info(
        'ipamclaims: the API server serves no IPAMClaims (KubeVirt persistent IPs); asking again later',
      );
  }

  status(): IpamClaimsReport {
    return {
      ...defined({ served: this.#served }),
      watch: this.#watch.status(),
      cache: this.cache.status(),
      statusWrites: this.#writer.stats(),
      upkeep: this.#upkeep.stats(),
      servedCheck: this.#servedCheck.status(),
    };
  }
}

/**
 * Whether the API server has the claim now. A server that no longer serves IPAMClaims at all (the
 * CRD deleted, and with it every claim) has none: their holdings end.
 */
export async function claimExists(api: Pick<ClaimApi, 'get'>, ref: ClaimRef): Promise<boolean> {
  try {
    return (await api.get(ref)) !== undefined;
  } catch (error) {
    if (isWarrenError(error, 'INVALID_CONFIG')) return false; // claim-api.ts: the CRD is not served
    throw error;
  }
}

/**
 * The holdings as the upkeep needs them: this node keeps a holding's placeholder in its own store
 * (allocator/holdings/: an allocation of network HELD_NETWORK whose container ID is the holder key),
 * read with no API request.
 */
export function storeClaimHoldings(
  store: Pick<Store, 'findByOwner' | 'list'>,
  holdings: Pick<Holdings, 'endHolding'>,
): ClaimHoldings {
  return {
    keeps: async (key) => (await store.findByOwner(placeholderOwner(key))).length > 0,
    keptClaimKeys: async () => [
      ...new Set(
        (await store.list({ network: HELD_NETWORK }))
          .map((a) => a.containerID)
          .filter((key) => claimOfHolding(key) !== undefined),
      ),
    ],
    endHolding: (key) => holdings.endHolding(key),
  };
}
