/**
 * The agent's side of a CNI call: validates the request again (the agent never trusts the plugin),
 * runs the command against the allocator and renders the answer in the config's version. Each call
 * ends in exactly one outcome: a result object, no output (DEL, CHECK, GC, STATUS succeed
 * silently), or a CNI error object.
 */
import { type Clock, systemClock } from '../core/clock.ts';
import { WarrenError } from '../core/errors.ts';
import { type IPAddress, formatIP, parseIP } from '../ipam/address.ts';
import type { Owner } from '../ipam/allocation.ts';
import { type StoreKind, inSubnet } from '../ipam/config.ts';
import { type Allocator, attachmentKey } from '../store/allocator.ts';
import { rangePoolOf } from '../store/store.ts';
import { type CniEnv, parseCniArgs, parseCniEnv, printable } from './args.ts';
import { type CniErrorObject, toCniError } from './errors.ts';
import { type NetConf, declaredVersion, parseNetConf } from './netconf.ts';
import { type CniCommand, type IpamResult, SPEC_VERSION, renderResult, versionResult } from './spec.ts';

/** What the plugin sends the agent: its environment, and stdin decoded. */
export interface CniRequest {
  readonly command: string;
  readonly containerID?: string;
  readonly netns?: string;
  readonly ifname?: string;
  readonly args?: string;
  readonly config: unknown;
}

export type CniOutcome =
  | { readonly kind: 'result'; readonly output: Record<string, unknown> }
  | { readonly kind: 'silent' }
  | { readonly kind: 'error'; readonly output: CniErrorObject };

export interface CniHandlerOptions {
  readonly allocator: Allocator;
  /** Throws a NOT_READY WarrenError when ADD cannot be served. */
  readonly readiness: () => Promise<void>;
  /** The store the agent runs on; a network config that names another is refused. */
  readonly storeKind?: StoreKind;
  readonly clock?: Clock;
  /**
   * GC spares allocations younger than this, ms. The runtime takes its list of valid attachments
   * before it calls GC; an ADD that commits in between is not on the list and is in use.
   */
  readonly gcGraceMs?: number;
  /** Runs before an ADD allocates: settles what is still pending for this attachment (journal). */
  readonly beforeAdd?: (owner: Owner) => Promise<void>;
  /** Told once per network about IPAM keys Warren accepts but does not act on. */
  readonly onIgnoredKeys?: (network: string, keys: readonly string[]) => void;
}

/** Default of CniHandlerOptions.gcGraceMs: far longer than any runtime takes from list to GC. */
export const DEFAULT_GC_GRACE_MS = 60_000;

export class CniHandler {
  readonly #allocator: Allocator;
  readonly #readiness: () => Promise<void>;
  readonly #storeKind: StoreKind | undefined;
  readonly #clock: Clock;
  readonly #gcGraceMs: number;
  readonly #onIgnoredKeys: ((network: string, keys: readonly string[]) => void) | undefined;
  readonly #beforeAdd: ((owner: Owner) => Promise<void>) | undefined;
  /** Networks whose ignored keys were already reported: once each, not on every call. */
  readonly #reportedIgnored = new Set<string>();

  constructor(options: CniHandlerOptions) {
    this.#allocator = options.allocator;
    this.#readiness = options.readiness;
    this.#storeKind = options.storeKind;
    this.#clock = options.clock ?? systemClock;
    this.#gcGraceMs = options.gcGraceMs ?? DEFAULT_GC_GRACE_MS;
    this.#onIgnoredKeys = options.onIgnoredKeys;
    this.#beforeAdd = options.beforeAdd;
  }

  async handle(request: CniRequest): Promise<CniOutcome> {
    const version = declaredVersion(request?.config) ?? SPEC_VERSION;
    try {
      const env = envOf(request);
      if (env.command === 'VERSION') return { kind: 'result', output: versionResult() };
      const conf = parseNetConf(request.config, env.command);
      this.#reportIgnored(conf);
      return await this.#run(env, conf);
    } catch (error) {
      return { kind: 'error', output: toCniError(error, version) };
    }
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
    this.#onIgnoredKeys(conf.name, conf.ipam.ignoredKeys.map((k) => `${k.path} (${k.reason})`));
  }

  async #run(env: CniEnv, conf: NetConf): Promise<CniOutcome> {
    const command: Exclude<CniCommand, 'VERSION'> = env.command as Exclude<CniCommand, 'VERSION'>;
    const wanted = conf.ipam.store;
    if (wanted !== undefined && this.#storeKind !== undefined && wanted !== this.#storeKind) {
      throw new WarrenError('INVALID_CONFIG', `network ${conf.name} asks for the ${wanted} store (ipam.store), but this agent runs on ${this.#storeKind}; start the agent with --store ${wanted}`);
    }
    switch (command) {
      case 'ADD':
        return this.#add(env, conf);
      case 'DEL':
        await this.#allocator.release(ownerOf(env, conf), conf.ipam.cooldownSeconds);
        return { kind: 'silent' };
      case 'CHECK':
        await this.#check(env, conf);
        return { kind: 'silent' };
      case 'GC': {
        const valid = new Set((conf.validAttachments ?? []).map((a) => attachmentKey(a.containerID, a.ifname)));
        const outcome = await this.#allocator.gc(conf.name, valid, conf.ipam.cooldownSeconds, { createdAtOrBefore: this.#clock.now() - this.#gcGraceMs });
        if (outcome.errors.length > 0) {
          throw new WarrenError('IO_FAILURE', `GC released ${outcome.released.length} addresses but failed for ${outcome.errors.length} attachments`, {
            details: outcome.errors.join('; '),
          });
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
    // No readiness probe here: it would cost a store round trip per ADD, and a store that cannot
    // serve fails the allocation itself with TRY_AGAIN (code 11) naming the store.
    const args = parseCniArgs(env.args);
    const requested: IPAddress[] = [...conf.requested];
    for (const text of args.ips) {
      const ip = parseIP(text.includes('/') ? text.slice(0, text.indexOf('/')) : text);
      if (ip === undefined) throw new WarrenError('BAD_ENV', `CNI_ARGS: IP "${printable(text)}" is not an IP address`);
      if (!requested.some((r) => r.family === ip.family && r.value === ip.value)) requested.push(ip);
    }
    const owner = ownerOf(env, conf);
    await this.#beforeAdd?.(owner);
    const assignments = await this.#allocator.allocate({
      owner,
      ranges: conf.ipam.ranges,
      requested,
      cooldownSeconds: conf.ipam.cooldownSeconds,
      ...(args.podNamespace === undefined ? {} : { podNamespace: args.podNamespace }),
      ...(args.podName === undefined ? {} : { podName: args.podName }),
      ...(args.podUID === undefined ? {} : { podUID: args.podUID }),
      ...(env.netns === undefined ? {} : { netns: env.netns }),
    });
    const result: IpamResult = {
      ips: assignments.map(({ range, allocation }) => ({
        address: `${allocation.address}/${range.prefixLength}`,
        ...(range.gateway === undefined ? {} : { gateway: formatIP(range.gateway) }),
      })),
      routes: conf.ipam.routes,
      dns: conf.ipam.dns ?? {},
    };
    return { kind: 'result', output: renderResult(result, conf.cniVersion) };
  }

  /** CHECK: every range must hold an address for this attachment, matching prevResult if given. */
  async #check(env: CniEnv, conf: NetConf): Promise<void> {
    const owner = ownerOf(env, conf);
    const held = await this.#allocator.held(owner);
    for (const range of conf.ipam.ranges) {
      const mine = held.find((a) => rangePoolOf(a.pool) === range.pool);
      if (mine === undefined) {
        throw new WarrenError('ALLOCATION_MISSING', `container ${owner.containerID} (${owner.ifname}) holds no address in ${range.pool}`);
      }
      for (const ip of conf.previousIPs ?? []) {
        if (inSubnet(range, ip) && formatIP(ip) !== mine.address) {
          throw new WarrenError('ALLOCATION_MISMATCH', `container ${owner.containerID} (${owner.ifname}) holds ${mine.address} in ${range.pool}, but prevResult says ${formatIP(ip)}`);
        }
      }
    }
  }
}

function envOf(request: CniRequest): CniEnv {
  if (typeof request !== 'object' || request === null) throw new WarrenError('BAD_REQUEST', 'request must be a JSON object');
  const env: NodeJS.ProcessEnv = { CNI_COMMAND: stringField(request.command, 'command') };
  if (request.containerID !== undefined) env.CNI_CONTAINERID = stringField(request.containerID, 'containerID');
  if (request.netns !== undefined) env.CNI_NETNS = stringField(request.netns, 'netns');
  if (request.ifname !== undefined) env.CNI_IFNAME = stringField(request.ifname, 'ifname');
  if (request.args !== undefined) env.CNI_ARGS = stringField(request.args, 'args');
  return parseCniEnv(env);
}

function stringField(value: unknown, name: string): string {
  if (typeof value !== 'string') throw new WarrenError('BAD_REQUEST', `request field ${name} must be a string`);
  return value;
}

function ownerOf(env: CniEnv, conf: NetConf): { network: string; containerID: string; ifname: string } {
  return { network: conf.name, containerID: env.containerID as string, ifname: env.ifname as string };
}
