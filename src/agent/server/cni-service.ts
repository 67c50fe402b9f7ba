/**
 * The agent's side of a CNI call: checks the request again (the agent never trusts the plugin),
 * runs the command against the allocator and renders the answer in the config's version. Each call
 * ends in exactly one outcome: a result object, no output (DEL, CHECK, GC, STATUS succeed
 * silently), or a CNI error object. It never throws.
 *
 * - The request's fields are checked with the plugin's own rules (server/cni-call.ts), so both refuse
 *   the same input with the same CNI code; a field of the wrong JSON type is BAD_REQUEST (7).
 * - A network config naming another store than the agent runs on is refused (7).
 * - With `nodeLocalOnly` (a per-node store while the Kubernetes source is on), ADD of a config that
 *   is not node-local is refused (7) naming the fixes (cni/node-local.ts): two nodes would hand out
 *   one address. DEL, CHECK and GC of it still run (they hand nothing out).
 * - ADD applies what is still pending for its attachment first (beforeAdd: a journaled DEL, a
 *   runtime event or pod release queued for its container or pod), and is idempotent per
 *   (network, containerID, ifname).
 * - GC spares allocations younger than the grace: the runtime lists its attachments before it
 *   calls GC, and an ADD that commits in between is not on the list but is in use. It judges only
 *   the asking runtime's attachments: never what a registered adapter answers for (allocator/gc.ts).
 * - STATUS answers 50 while the agent cannot serve ADD (readiness); while the add gate says why
 *   ADD must wait (readiness indicator, host-local import, hand-back) ADD answers 11 with the reason.
 * - Whereabouts keys Warren accepts but does not act on are reported once per network.
 * - A DEL whose config does not validate still releases its attachment's addresses, found by
 *   network name, container ID and interface (cni/del-target.ts); it fails (7) only when the config
 *   names no network. The runtime would retry a failed DEL for ever, the address held meanwhile.
 */
import { type Clock, systemClock } from '../../core/clock.ts';
import { defined } from '../../core/defined.ts';
import { WarrenError, messageOf } from '../../core/errors.ts';
import { momentOf, shifted } from '../../core/moment.ts';
import { type IPAddress, formatIP, parseIP } from '../../ipam/address.ts';
import type { Owner } from '../../ipam/allocation.ts';
import { inSubnet } from '../../ipam/range.ts';
import type { StoreKind } from '../../store/store.ts';
import { type Allocator, type RuntimeOf, attachmentKey } from '../../allocator/allocator.ts';
import { heldInRange } from '../../ipam/shared-pools.ts';
import { type CniEnv, parseCniArgs, printable } from '../../cni/args.ts';
import { delTargetOf } from '../../cni/del-target.ts';
import { type NetConf, declaredVersion, parseNetConf } from '../../cni/netconf.ts';
import { type NodeLocalConfig, perNodeRefusal } from '../../cni/node-local.ts';
import { type CniCommand, type IpamResult, SPEC_VERSION, renderResult, versionResult } from '../../cni/spec.ts';
import { isExpected, toCniError } from '../../api/errors.ts';
import type { CniOutcome, CniRequest } from '../../api/protocol.ts';
import type { CniErrorObject } from '../../cni/errors.ts';
import { type FailedCall, NO_TELEMETRY, type Telemetry } from '../metrics/telemetry.ts';
import { SETTINGS } from '../settings/table.ts';
import { type AddOutcome, type AddPlanner, podRefOf, runPlanners } from './add-plan.ts';
import { cniCallOf, ownerOf } from './cni-call.ts';

export interface CniServiceOptions {
  readonly allocator: Allocator;
  /** Throws a NOT_READY WarrenError when ADD cannot be served. */
  readonly readiness: () => Promise<void>;
  /**
   * Why ADD of `network` must wait, checked before every ADD without a round trip (the readiness
   * indicator is missing, the network's host-local reservations are not imported yet, the node was
   * handed back); undefined when it need not. ADD then answers try-again (11) with the reason.
   */
  readonly addGate?: (network: string) => string | undefined;
  /** The store the agent runs on; a network config that names another is refused. */
  readonly storeKind?: StoreKind;
  /**
   * Present when only node-local configs may be served (a per-node store while the Kubernetes
   * source is on): answers the config derived from the node's own CIDR, if any (cni/node-local.ts).
   */
  readonly nodeLocalOnly?: () => NodeLocalConfig | undefined;
  readonly clock?: Clock;
  /**
   * GC spares allocations younger than this, ms. The runtime takes its list of valid attachments
   * before it calls GC; an ADD that commits in between is not on the list and is in use.
   */
  readonly gcGraceMs?: number;
  /**
   * Which registered runtime adapter answers for an allocation (undefined: none). A GC never takes
   * what an adapter answers for, and takes nothing when its list names such an attachment (gc.ts).
   */
  readonly runtimeOf?: RuntimeOf;
  /**
   * Runs before an ADD allocates: applies what is still pending for this attachment, its container
   * or its pod (`podUID`, from CNI_ARGS, when given): the journal, runtime events, pod releases.
   */
  readonly beforeAdd?: (owner: Owner, podUID?: string) => Promise<void>;
  /**
   * Plan an ADD before it allocates, in order (pools, addresses, holdings: add-plan.ts), from the
   * config's ranges and requested addresses; one may refuse the ADD. None: the config's plan.
   */
  readonly planners?: readonly AddPlanner[];
  /**
   * Told of each ADD that allocated (after the commit, before the answer), to report it elsewhere
   * (an IPAMClaim's status); it must not block the answer: slow work is queued, not awaited.
   */
  readonly afterAdd?: (outcome: AddOutcome) => void;
  /** Told once per network about IPAM keys Warren accepts but does not act on. */
  readonly onIgnoredKeys?: (network: string, keys: readonly string[]) => void;
  /**
   * Told of a call that failed unexpectedly (a store or disk failure, a bug), for the log. Refusals
   * of bad input and "try again" are the caller's business and are not reported (api/errors.ts).
   */
  readonly onFailure?: (error: unknown, command: string) => void;
  /** Told of every call (command, CNI code, seconds) and of what DEL and GC released. */
  readonly telemetry?: Telemetry;
}

/** Default of CniServiceOptions.gcGraceMs: --gc-grace's default (far longer than any runtime takes from list to GC). */
export const DEFAULT_GC_GRACE_MS = Number(SETTINGS.gcGraceSeconds.default) * 1000;

type ConfiguredCommand = Exclude<CniCommand, 'VERSION'>;

export class CniService {
  readonly #allocator: Allocator;
  readonly #readiness: () => Promise<void>;
  readonly #addGate: ((network: string) => string | undefined) | undefined;
  readonly #storeKind: StoreKind | undefined;
  readonly #nodeLocalOnly: (() => NodeLocalConfig | undefined) | undefined;
  readonly #clock: Clock;
  readonly #gcGraceMs: number;
  readonly #onIgnoredKeys: ((network: string, keys: readonly string[]) => void) | undefined;
  readonly #beforeAdd: ((owner: Owner, podUID?: string) => Promise<void>) | undefined;
  readonly #runtimeOf: RuntimeOf | undefined;
  readonly #onFailure: ((error: unknown, command: string) => void) | undefined;
  readonly #telemetry: Telemetry;
  readonly #planners: readonly AddPlanner[];
  readonly #afterAdd: ((outcome: AddOutcome) => void) | undefined;
  /** Networks whose ignored keys were already reported: once each, not on every call. */
  readonly #reportedIgnored = new Set<string>();

  constructor(options: CniServiceOptions) {
    this.#allocator = options.allocator;
    this.#readiness = options.readiness;
    this.#addGate = options.addGate;
    this.#storeKind = options.storeKind;
    this.#nodeLocalOnly = options.nodeLocalOnly;
    this.#clock = options.clock ?? systemClock;
    this.#gcGraceMs = options.gcGraceMs ?? DEFAULT_GC_GRACE_MS;
    this.#onIgnoredKeys = options.onIgnoredKeys;
    this.#beforeAdd = options.beforeAdd;
    this.#runtimeOf = options.runtimeOf;
    this.#onFailure = options.onFailure;
    this.#telemetry = options.telemetry ?? NO_TELEMETRY;
    this.#planners = options.planners ?? [];
    this.#afterAdd = options.afterAdd;
  }

  /** One CNI call, as the plugin sent it (unchecked: it came over the wire). */
  async handle(request: CniRequest): Promise<CniOutcome> {
    const started = performance.now();
    const outcome = await this.#handle(request);
    const code = outcome.kind === 'error' ? outcome.output.code : 0;
    const command = typeof request?.command === 'string' ? request.command : '';
    this.#telemetry.cniCall(command, code, (performance.now() - started) / 1000);
    if (outcome.kind === 'error') this.#telemetry.cniFailed(failureOf(request, command, outcome.output));
    return outcome;
  }

  async #handle(request: CniRequest): Promise<CniOutcome> {
    const version = declaredVersion(request?.config) ?? SPEC_VERSION;
    try {
      const call = cniCallOf(request);
      if (call.env.command === 'VERSION') return { kind: 'result', output: versionResult() };
      let conf: NetConf;
      try {
        conf = parseNetConf(call.config, call.env.command);
      } catch (invalid) {
        if (call.env.command !== 'DEL') throw invalid;
        return await this.#delOfInvalidConfig(call.env, call.config, invalid);
      }
      this.#reportIgnored(conf);
      return await this.#run(call.env.command, call.env, conf);
    } catch (error) {
      if (!isExpected(error))
        this.#onFailure?.(error, typeof request?.command === 'string' ? printable(request.command) : '?');
      return { kind: 'error', output: toCniError(error, version) };
    }
  }

  /**
   * A DEL whose config does not validate releases what its attachment holds all the same, found by
   * the network name, container ID and interface alone (cni/del-target.ts says what is read), as a
   * journaled DEL is; refused (7) only when the config does not even name its network.
   */
  async #delOfInvalidConfig(env: CniEnv, config: unknown, invalid: unknown): Promise<CniOutcome> {
    const problem = messageOf(invalid);
    const target = delTargetOf(config, problem);
    const released = await this.#allocator.release(ownerOf(env, { name: target.network }), target.cooldownSeconds);
    this.#telemetry.released('cni-del', released, `CNI DEL (its network config is invalid: ${problem})`);
    return { kind: 'silent' };
  }

  /** Whereabouts keys Warren accepts but does not act on: said once per network and key set. */
  #reportIgnored(conf: NetConf): void {
    if (conf.ipam.ignoredKeys.length === 0 || this.#onIgnoredKeys === undefined) return;
    const paths = conf.ipam.ignoredKeys.map((k) => k.path);
    const key = JSON.stringify([conf.name, paths]);
    if (this.#reportedIgnored.has(key)) return;
    // Bounded: a caller sending ever new names must not grow this without end.
    if (this.#reportedIgnored.size >= 1_000) this.#reportedIgnored.clear();
    this.#reportedIgnored.add(key);
    this.#onIgnoredKeys(
      conf.name,
      conf.ipam.ignoredKeys.map((k) => `${k.path} (${k.reason})`),
    );
  }

  async #run(command: ConfiguredCommand, env: CniEnv, conf: NetConf): Promise<CniOutcome> {
    const wanted = conf.ipam.store;
    if (wanted !== undefined && this.#storeKind !== undefined && wanted !== this.#storeKind) {
      throw new WarrenError(
        'INVALID_CONFIG',
        `network ${conf.name} asks for the ${wanted} store (ipam.store), but this agent runs on ` +
          `${this.#storeKind}; start the agent with --store ${wanted}`,
      );
    }
    switch (command) {
      case 'ADD':
        return this.#add(env, conf);
      case 'DEL':
        this.#telemetry.released(
          'cni-del',
          await this.#allocator.release(ownerOf(env, conf), conf.ipam.cooldownSeconds),
          'CNI DEL',
        );
        return { kind: 'silent' };
      case 'CHECK':
        await this.#check(env, conf);
        return { kind: 'silent' };
      case 'GC': {
        const valid = new Set((conf.validAttachments ?? []).map((a) => attachmentKey(a.containerID, a.ifname)));
        const outcome = await this.#allocator.gc(
          conf.name,
          valid,
          conf.ipam.cooldownSeconds,
          { createdAtOrBefore: shifted(momentOf(this.#clock), -this.#gcGraceMs) },
          this.#runtimeOf,
        );
        this.#telemetry.released('gc', outcome.released, "CNI GC: not among the runtime's valid attachments");
        if (outcome.errors.length > 0) {
          throw new WarrenError(
            'IO_FAILURE',
            `GC released ${outcome.released.length} addresses but failed for ${outcome.errors.length} attachments`,
            {
              details: outcome.errors.join('; '),
            },
          );
        }
        return { kind: 'silent' };
      }
      case 'STATUS':
        await this.#readiness();
        return { kind: 'silent' };
      default: {
        const never: never = command;
        throw new WarrenError('BAD_ENV', `unhandled command ${String(never)}`);
      }
    }
  }

  async #add(env: CniEnv, conf: NetConf): Promise<CniOutcome> {
    // No store probe here: it would cost a round trip per ADD, and a store that cannot serve
    // fails the allocation itself with TRY_AGAIN (code 11) naming the store.
    if (this.#nodeLocalOnly !== undefined) {
      const refusal = perNodeRefusal(conf, this.#nodeLocalOnly());
      if (refusal !== undefined) throw new WarrenError('INVALID_CONFIG', refusal);
    }
    const gated = this.#addGate?.(conf.name);
    if (gated !== undefined) throw new WarrenError('TRY_AGAIN', gated);
    const args = parseCniArgs(env.args);
    const requested: IPAddress[] = [...conf.requested];
    for (const text of args.ips) {
      const ip = parseIP(text.includes('/') ? text.slice(0, text.indexOf('/')) : text);
      if (ip === undefined) throw new WarrenError('BAD_ENV', `CNI_ARGS: IP "${printable(text)}" is not an IP address`);
      if (!requested.some((r) => r.family === ip.family && r.value === ip.value)) requested.push(ip);
    }
    const owner = ownerOf(env, conf);
    await this.#beforeAdd?.(owner, args.podUID);
    const pod = podRefOf(args);
    const attachment = { containerID: owner.containerID, ifname: owner.ifname };
    const plan = await runPlanners(this.#planners, conf, pod, { ranges: conf.ipam.ranges, requested }, attachment);
    if (plan.ranges.length === 0)
      throw new WarrenError(
        'INVALID_CONFIG',
        `network ${conf.name} names WarrenPools (ipam.pools), and this agent does not read them: pools need ` +
          'the agent on the kubernetes store with the Kubernetes source on (docs/kubernetes.md, Pools)',
      );
    const assignments = await this.#allocator.allocate({
      owner,
      ranges: plan.ranges,
      requested: plan.requested,
      ...defined({ holding: plan.holding }),
      cooldownSeconds: conf.ipam.cooldownSeconds,
      ...defined({ podNamespace: args.podNamespace, podName: args.podName, podUID: args.podUID, netns: env.netns }),
    });
    const result: IpamResult = {
      ips: assignments.map(({ range, allocation }) => ({
        address: `${allocation.address}/${range.prefixLength}`,
        ...(range.gateway === undefined ? {} : { gateway: formatIP(range.gateway) }),
      })),
      routes: plan.routes ?? conf.ipam.routes,
      dns: conf.ipam.dns ?? {},
    };
    this.#afterAdd?.({ network: conf.name, pod, attachment, plan, ips: result.ips.map((ip) => ip.address) });
    return { kind: 'result', output: renderResult(result, conf.cniVersion) };
  }

  /** CHECK: every range must hold an address for this attachment, matching prevResult if given. */
  async #check(env: CniEnv, conf: NetConf): Promise<void> {
    const owner = ownerOf(env, conf);
    const held = await this.#allocator.held(owner);
    // A network drawing from WarrenPools: which pool served this pod was planned at its ADD.
    if (conf.ipam.pools !== undefined && held.length === 0)
      throw new WarrenError('ALLOCATION_MISSING', `container ${owner.containerID} (${owner.ifname}) holds no address`);
    for (const range of conf.ipam.ranges) {
      const mine = held.find((a) => heldInRange(range, a));
      if (mine === undefined) {
        throw new WarrenError(
          'ALLOCATION_MISSING',
          `container ${owner.containerID} (${owner.ifname}) holds no address in ${range.pool}`,
        );
      }
      for (const ip of conf.previousIPs ?? []) {
        if (inSubnet(range, ip) && formatIP(ip) !== mine.address) {
          throw new WarrenError(
            'ALLOCATION_MISMATCH',
            `container ${owner.containerID} (${owner.ifname}) holds ${mine.address} in ${range.pool}, but ` +
              `prevResult says ${formatIP(ip)}`,
          );
        }
      }
    }
  }
}

/** A failed call as the dashboard lists it: each field only when the caller sent one of its kind. */
function failureOf(request: CniRequest, command: string, error: CniErrorObject): FailedCall {
  const config: unknown = request?.config;
  const name = typeof config === 'object' && config !== null ? (config as { name?: unknown }).name : undefined;
  const containerID = request?.containerID;
  return {
    command: printable(command),
    code: error.code,
    network: typeof name === 'string' ? printable(name) : '',
    message: error.msg,
    containerID: typeof containerID === 'string' ? printable(containerID) : '',
  };
}
