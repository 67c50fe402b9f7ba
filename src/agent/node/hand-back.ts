/**
 * `warren uninstall` on the agent's side (POST /v1/uninstall): hands the node back to the primary's
 * IPAM, in the one order in which no pod start gets a duplicate or a permanent failure:
 *
 *   1. the mark: a file in the state directory records that the node is handed back, before
 *      anything else, so an agent restarted at any later instant stays handed back (it never
 *      takes the node over again by itself);
 *   2. ADD refused (try again, 11, naming `warren uninstall`): while Warren's config is still
 *      first, a new pod waits; once it is gone, the runtime's retry goes to the primary;
 *   3. host-local's reservations written for every address Warren holds (node/host-local-takeover.ts),
 *      so the primary's IPAM never hands one of them out;
 *   4. Warren's config removed: from here on the runtime uses the primary for ADD and DEL, and a
 *      DEL of a pod Warren addressed releases host-local's reservation; a DEL still reaching
 *      Warren takes that reservation with it.
 *
 * Without the config manager (`--manage-cni-config off`: beside Multus, under systemd) steps 3 and 4
 * have nothing to do: no primary IPAM was taken over and the configs naming Warren (Multus'
 * NetworkAttachmentDefinitions, files) are the operator's. The node is handed back all the same
 * (steps 1 and 2), and the report counts the addresses pods still hold (`held`): their DELs still
 * call the plugin, so the CLI removes it only once none is left.
 *
 * Then the CLI removes the plugin from the CNI bin dir (nothing calls it once the config is gone),
 * and the agent, on its next clean stop, removes its database and journal, keeping only the mark.
 * Repeating the call repeats steps 2–4 (idempotent) and keeps the first time.
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../../core/atomic-file.ts';
import { readRegularFile } from '../../core/bounded-read.ts';
import type { Clock } from '../../core/clock.ts';
import type { UninstallReport } from '../../api/status.ts';
import type { CniConfigManager } from './cni-config-manager.ts';
import type { HostLocalTakeover } from './host-local-takeover.ts';

/** The mark's name in the state directory. */
export const HANDED_BACK_MARK = 'handed-back.json';

/** A network handed back: enough for a restarted agent to keep cleaning its reservations. */
export interface HandedBackNetwork {
  readonly network: string;
  readonly dataDir: string;
}

interface Mark {
  readonly at: string;
  readonly targets: readonly HandedBackNetwork[];
}

export class NodeHandBack {
  readonly #mark: string;
  readonly #clock: Clock;
  #at: string | undefined;
  #targets: Mark['targets'] = [];

  constructor(stateDir: string, clock: Clock) {
    this.#mark = join(stateDir, HANDED_BACK_MARK);
    this.#clock = clock;
    this.#load();
  }

  get mark(): string {
    return this.#mark;
  }

  /** Why ADD is refused (and STATUS answers 50) once the node was handed back; undefined before. */
  reason(): string | undefined {
    if (this.#at === undefined) return undefined;
    return (
      `not serving: this node was handed back to its primary IPAM by \`warren uninstall\` at ${this.#at}; ` +
      `to take it over again, remove ${this.#mark} and restart the agent`
    );
  }

  /** The networks handed back before this start, so releases keep cleaning their reservations. */
  targets(): Mark['targets'] {
    return this.#targets;
  }

  /** Steps 1–4 of the module header. */
  async uninstall(
    takeover: HostLocalTakeover | undefined,
    cniConfig: CniConfigManager | undefined,
    held: number,
  ): Promise<UninstallReport> {
    const at = this.#at ?? new Date(this.#clock.now()).toISOString();
    const targets = takeover?.targets() ?? this.#targets;
    const mark: Mark = { at, targets: targets.map((t) => ({ network: t.network, dataDir: t.dataDir })) };
    writeFileAtomic(this.#mark, `${JSON.stringify(mark)}\n`, 0o600);
    this.#at = at;
    const reason = this.reason() as string;
    const networks = takeover === undefined ? [] : await takeover.handBack(reason);
    const configRemoved = cniConfig?.handBack(reason) ?? false;
    return {
      at,
      networks,
      configRemoved,
      ...(cniConfig === undefined ? {} : { output: cniConfig.output }),
      held,
      marker: this.#mark,
    };
  }

  /** After a clean stop of a handed-back agent: its database and journal go; the mark stays. */
  removeState(paths: { database?: string; journalDir: string }): void {
    if (this.#at === undefined) return;
    if (paths.database !== undefined)
      for (const suffix of ['', '-wal', '-shm', '-journal', '.lock'])
        rmSync(`${paths.database}${suffix}`, { force: true });
    if (existsSync(paths.journalDir)) rmSync(paths.journalDir, { recursive: true, force: true });
  }

  #load(): void {
    let read;
    try {
      read = readRegularFile(this.#mark, 1 << 20, { noFollow: true });
    } catch {
      return;
    }
    if (read.kind !== 'read') return;
    // A mark that cannot be read still marks: never take a handed-back node over by accident.
    this.#at = 'an earlier start';
    try {
      const mark = JSON.parse(read.text) as Partial<Mark>;
      if (typeof mark.at === 'string') this.#at = mark.at;
      if (Array.isArray(mark.targets))
        this.#targets = mark.targets.filter((t) => typeof t?.network === 'string' && typeof t?.dataDir === 'string');
    } catch {
      // kept as marked
    }
  }
}
