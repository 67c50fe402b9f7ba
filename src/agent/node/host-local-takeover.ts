/**
 * Taking a host-local primary's range over, and handing it back (docs/node-cni-config.md,
 * with the hand-back). The config manager tells this what it takes over (adopt: the network, host-local's
 * data dir, the ranges) before it writes Warren's config; host-local's reservations there
 * (cni/host-local-reservation.ts) become allocations of their containers, released by the usual
 * sources (DEL, GC, containerd, pods) when those go. `warren uninstall` hands the node back (handBack).
 *
 * Guarantees:
 * - No ADD of a network is served from its range before that network's reservations were imported
 *   (gate: ADD answers 11 with the reason). When Warren's config is new on the node (`fresh`),
 *   the gate stays closed until a pass that began one interval after it was written: an ADD the
 *   runtime began with the primary just before it loaded Warren's config has made its reservation
 *   by then, and it is imported before Warren hands out anything. The import runs again every
 *   interval after that too. An address host-local reserved that Warren holds for another container is a
 *   conflict: reported (log, status), never overwritten.
 * - Host-local's files are read bounded and non-blocking (core/bounded-read.ts): a FIFO, a device,
 *   a symlink or a huge file is skipped and reported, and at most MAX_RESERVATION_FILES names are
 *   looked at. Host-local's own files are left as they are while Warren serves: while they exist,
 *   host-local never hands those addresses out, should it ever be asked again.
 * - handBack first refuses every ADD for good (11, naming `warren uninstall`), imports once more,
 *   then makes each data dir say what Warren holds in its ranges (host-local-data-dir.ts writeHeld):
 *   a reservation file, written atomically in host-local's format, for every address Warren holds;
 *   the files of addresses in those ranges that Warren no longer holds (their containers went while
 *   Warren served) removed.
 *   From then on, every address Warren releases (a DEL still reaching Warren) takes its
 *   reservation file with it when that file names the same container and interface.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import { readRegularFile, unreadReason } from '../../core/bounded-read.ts';
import type { Clock } from '../../core/clock.ts';
import { messageOf } from '../../core/errors.ts';
import { PeriodicTask } from '../../core/periodic-task.ts';
import { type IPAddress, formatIP } from '../../ipam/address.ts';
import type { Allocation } from '../../ipam/allocation.ts';
import { rangePoolOfKey } from '../../ipam/blocks.ts';
import { inSubnet } from '../../ipam/range.ts';
import type { Allocator } from '../../allocator/allocator.ts';
import type { Store } from '../../store/store.ts';
import { MAX_RESERVATION_BYTES, parseReservation } from '../../cni/host-local-reservation.ts';
import type { HandBackReport, TakeoverStatus } from '../../api/status.ts';
import { type HostLocalTarget, listReservations, removeReleased, writeHeld } from './host-local-data-dir.ts';

export type { HostLocalTarget };

export interface HostLocalTakeoverOptions {
  readonly allocator: Allocator;
  readonly store: Store;
  readonly node: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How often the data dirs are imported again, ms. */
  readonly rescanMs?: number;
}

interface Adopted {
  readonly target: HostLocalTarget;
  /** Same target, same key: adopt() of an unchanged config changes nothing. */
  readonly key: string;
  imported: boolean;
  /** A pass that began before this (clock ms) does not open the gate (see the header). */
  readonly settledAt: number;
  /** The problem of each file name (the directory's own under ""), as the last pass judged it. */
  readonly problems: Map<string, string>;
  /** Names judged by an earlier pass and still there: not read again (a /16 has 65,536). */
  readonly seen: Set<string>;
}

/**
 * What one reservation file comes to: imported; nothing to do (not Warren's range, gone, or held
 * already); a problem that stays until the file changes; or an import the store refused, which
 * is tried again at the next pass.
 */
type Judgement =
  | { readonly kind: 'imported' }
  | { readonly kind: 'nothing' }
  | { readonly kind: 'problem'; readonly problem: string }
  | { readonly kind: 'refused'; readonly problem: string };

export class HostLocalTakeover {
  readonly #o: HostLocalTakeoverOptions;
  readonly #adopted = new Map<string, Adopted>();
  readonly #task: PeriodicTask<void>;
  #handedBack: string | undefined;
  /** handBack's own last import runs although the node is being handed back. */
  #finalImport = false;
  readonly #rescanMs: number;

  constructor(options: HostLocalTakeoverOptions) {
    this.#o = options;
    this.#rescanMs = options.rescanMs ?? 5_000;
    this.#task = new PeriodicTask({
      clock: options.clock,
      intervalMs: this.#rescanMs,
      run: () => this.#importAll(),
      onError: (error) =>
        options.logger.error({ err: error }, 'importing host-local reservations failed; trying again'),
    });
  }

  start(signal: AbortSignal): void {
    this.#task.start(signal);
  }

  /**
   * The config manager is about to write a config that takes `target` over (or has written it):
   * until its reservations are imported, ADD of that network waits. Synchronous, so it holds
   * before the write.
   */
  adopt(target: HostLocalTarget, fresh = false): void {
    const key = JSON.stringify([target.dataDir, target.ranges.map((r) => r.pool)]);
    if (this.#adopted.get(target.network)?.key === key) return;
    const settledAt = this.#o.clock.now() + (fresh ? this.#rescanMs : 0);
    this.#adopted.set(target.network, {
      target,
      key,
      imported: false,
      settledAt,
      problems: new Map(),
      seen: new Set(),
    });
    this.#o.logger.info(
      { network: target.network, dataDir: target.dataDir },
      `taking network ${target.network} over from host-local: importing its reservations first`,
    );
    this.#task
      .runNow()
      .catch((error: unknown) =>
        this.#o.logger.error(
          { err: error, network: target.network },
          'importing host-local reservations failed; trying again',
        ),
      );
  }

  /** Why ADD of `network` must wait; undefined when it need not. */
  gate(network: string): string | undefined {
    if (this.#handedBack !== undefined) return this.#handedBack;
    const a = this.#adopted.get(network);
    if (a === undefined || a.imported) return undefined;
    const problems = a.problems.size === 0 ? '' : ` (${[...a.problems.values()].slice(0, 3).join('; ')})`;
    return (
      `not ready: network ${network} is being taken over from host-local; its reservations in ` +
      `${a.target.dataDir} are not imported yet${problems}`
    );
  }

  status(): TakeoverStatus[] {
    return [...this.#adopted.values()].map((a) => ({
      network: a.target.network,
      dataDir: a.target.dataDir,
      imported: a.imported,
      ...(a.problems.size === 0 ? {} : { problems: [...a.problems.values()] }),
      ...(this.#handedBack === undefined ? {} : { handedBack: true }),
    }));
  }

  /** The networks taken over (for the hand-back marker); see handBack. */
  targets(): HostLocalTarget[] {
    return [...this.#adopted.values()].map((a) => a.target);
  }

  /** Restores targets of an earlier hand-back (after a restart): releases keep cleaning their files. */
  restoreHandedBack(
    reason: string,
    targets: ReadonlyArray<{ readonly network: string; readonly dataDir: string }>,
  ): void {
    this.#handedBack = reason;
    for (const t of targets)
      this.#adopted.set(t.network, {
        target: { ...t, ranges: [] },
        key: '',
        imported: true,
        settledAt: 0,
        problems: new Map(),
        seen: new Set(),
      });
  }

  /** Gives every taken-over range back to host-local; see the module header. */
  async handBack(reason: string): Promise<HandBackReport[]> {
    this.#handedBack = reason;
    // One more import (ADD is refused already): what host-local reserved last is handed back too.
    this.#finalImport = true;
    await this.#task
      .runNow()
      .catch((error: unknown) =>
        this.#o.logger.warn({ err: error }, 'the last import of host-local reservations before the hand-back failed'),
      );
    this.#finalImport = false;
    const reports: HandBackReport[] = [];
    for (const { target } of this.#adopted.values()) reports.push(await this.#handBack(target));
    return reports;
  }

  /** Told of every release: once handed back, the reservation file of what Warren released goes. */
  released(allocations: readonly Allocation[]): void {
    if (this.#handedBack === undefined) return;
    for (const a of allocations) {
      const target = this.#adopted.get(a.network)?.target;
      if (target !== undefined) removeReleased(target.dataDir, a);
    }
  }

  async #importAll(): Promise<void> {
    if (this.#handedBack !== undefined && !this.#finalImport) return;
    const startedAt = this.#o.clock.now();
    for (const a of [...this.#adopted.values()]) {
      const before = new Set(a.problems.values());
      const imported = await this.#import(a);
      // A target replaced meanwhile (another primary) is judged by its own pass.
      if (this.#adopted.get(a.target.network) !== a) continue;
      const problems = [...a.problems.values()];
      // The runtime may still be finishing an ADD with the primary.
      if (!a.imported && startedAt < a.settledAt) continue;
      if (!a.imported)
        this.#o.logger.info(
          { network: a.target.network, dataDir: a.target.dataDir, imported, problems },
          `imported host-local's reservations of network ${a.target.network}`,
        );
      else if (imported > 0)
        this.#o.logger.warn(
          { network: a.target.network, imported },
          `imported ${imported} reservations host-local made after Warren took network ${a.target.network} over`,
        );
      // Said once, not at every rescan: a problem stays in status until its file changes.
      for (const problem of problems)
        if (!before.has(problem))
          this.#o.logger.warn({ network: a.target.network, dataDir: a.target.dataDir }, problem);
      a.imported = true;
    }
  }

  /**
   * One import of a data dir: the names not judged before. How many were imported. Throws only
   * when the store fails; the names not judged yet are judged at the next pass.
   */
  async #import(a: Adopted): Promise<number> {
    const { target, problems, seen } = a;
    const listing: string[] = [];
    const names = listReservations(target.dataDir, listing);
    if (listing.length === 0) problems.delete('');
    else problems.set('', listing.join('; '));
    const present = new Set(names.map(([name]) => name));
    for (const name of seen) {
      if (present.has(name)) continue;
      seen.delete(name);
      problems.delete(name);
    }
    let imported = 0;
    for (const [name, ip] of names) {
      // Judged before and still there: imported, or a problem (kept). Gone and back: judged again.
      if (seen.has(name)) continue;
      const judged = await this.#judge(target, name, ip);
      switch (judged.kind) {
        case 'imported':
          imported += 1;
          // A refused import that a later pass imported is no longer a problem.
          problems.delete(name);
          break;
        case 'nothing':
          problems.delete(name);
          break;
        case 'problem':
        case 'refused':
          problems.set(name, judged.problem);
          break;
        default: {
          const never: never = judged;
          throw new Error(`unhandled judgement ${JSON.stringify(never)}`);
        }
      }
      // An import the store refused is tried again at the next pass.
      if (judged.kind !== 'refused') seen.add(name);
    }
    return imported;
  }

  /** One reservation file, judged; see Judgement. */
  async #judge(target: HostLocalTarget, name: string, ip: IPAddress): Promise<Judgement> {
    const nothing = { kind: 'nothing' } as const;
    const range = target.ranges.find((r) => r.family === ip.family && inSubnet(r, ip));
    if (range === undefined) return nothing; // another range's (host-local's config changed): not Warren's
    const file = join(target.dataDir, name);
    const read = readRegularFile(file, MAX_RESERVATION_BYTES, { noFollow: true });
    if (read.kind === 'missing') return nothing;
    if (read.kind !== 'read') return { kind: 'problem', problem: `${file} ${unreadReason(read)}; skipped` };
    const owner = parseReservation(read.text);
    if (!owner.ok) return { kind: 'problem', problem: `${file}: ${owner.reason}; skipped` };
    const address = formatIP(ip);
    const holder = (await this.#o.store.list({ rangePool: range.pool, address }))[0];
    if (holder !== undefined) {
      const same = holder.containerID === owner.containerID && holder.ifname === owner.ifname;
      if (same && holder.network === target.network) return nothing;
      const reserved = `host-local reserved ${address} for ${owner.containerID} (${owner.ifname})`;
      const held = `Warren holds it for ${holder.containerID} (${holder.ifname}) of network ${holder.network}`;
      return { kind: 'problem', problem: `${file}: ${reserved}, but ${held}; one of them must be removed by hand` };
    }
    try {
      await this.#o.allocator.allocate({
        owner: { network: target.network, containerID: owner.containerID, ifname: owner.ifname },
        ranges: [range],
        requested: [ip],
      });
      return { kind: 'imported' };
    } catch (error) {
      const what = `${address} for ${owner.containerID} (${owner.ifname})`;
      return { kind: 'refused', problem: `${file}: ${what} could not be imported: ${messageOf(error)}` };
    }
  }

  async #handBack(target: HostLocalTarget): Promise<HandBackReport> {
    const pools = new Set(target.ranges.map((r) => r.pool));
    const held = (await this.#o.store.list({ network: target.network, node: this.#o.node })).filter((a) =>
      pools.has(rangePoolOfKey(a.pool)),
    );
    const report = writeHeld(target, held);
    this.#o.logger.info(report, `handed network ${target.network} back to host-local`);
    return report;
  }
}
