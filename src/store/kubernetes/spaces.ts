/**
 * Address spaces on the Kubernetes API (`ClusterTier.spaces`): the ranges admitted in one address
 * space (a network_name and family) are the list `spec.admitted` of one WarrenAddressSpace object,
 * named `spaceName(space)`, and an admission is an update of that object guarded by the
 * resourceVersion it was read at (a create when there was none): of two agents admitting at once,
 * the second gets a conflict and decides again on what the first wrote.
 *
 * What a reading says a range holds (`held`) is what the tier can read cheaply, not a count of
 * addresses: for each range recorded in the cluster (WarrenRange objects, a handful), one listing of
 * at most one of its claims (no allocations: those are published apart). A range with no claimed
 * block holds 0; a range with one holds at least 1 (a claimed block may hold addresses not yet
 * published). So `held` never says 0 of a range that holds an address in a claimed block, and the
 * cost of a reading grows with the number of ranges, not with the addresses they hold.
 *
 * `admit` checks, before it writes, that every range it retires still has no claimed block (its
 * reading said 0); a block claimed in the instant between that check and the write is not seen, the
 * one gap against etcd's single transaction.
 */
import type { AddressSpaces, AdmissionGuard, Revision, SpaceReading } from '../store.ts';
import { RANGE_LABEL, labelValue, selectorOf, spaceName } from './names.ts';
import { admittedOf, metaOf, rangeOf, spaceObject } from './objects.ts';
import type { Resource } from './resources.ts';

export interface KubeSpacesOptions {
  readonly spaces: Resource;
  readonly ranges: Resource;
  readonly blocks: Resource;
}

export class KubeSpaces implements AddressSpaces {
  readonly #o: KubeSpacesOptions;
  /** The resourceVersion of the last reading of each space (RVs are the API's strings; revisions numbers). */
  readonly #versions = new Map<string, { revision: Revision; version: string }>();

  constructor(options: KubeSpacesOptions) {
    this.#o = options;
  }

  async read(space: string): Promise<SpaceReading> {
    const object = await this.#o.spaces.get(`read address space ${space}`, spaceName(space));
    const meta = metaOf(object);
    const admitted = (object === undefined ? [] : admittedOf(object)) ?? [];
    const held = new Map<string, number>();
    for (const item of await this.#o.ranges.listAll('list ranges', '')) {
      const range = rangeOf(item);
      if (range !== undefined) held.set(range.pool, await this.#held(range.pool));
    }
    const revision: Revision = meta === undefined ? 0 : Number(meta.resourceVersion);
    if (meta !== undefined) this.#versions.set(space, { revision, version: meta.resourceVersion });
    return { space, revision, admitted, held };
  }

  /** At least what range `pool` holds: 0 without a claimed block (see the header). */
  async #held(pool: string): Promise<number> {
    const page = await this.#o.blocks.list(
      `read the blocks of range ${pool}`,
      selectorOf({ [RANGE_LABEL]: labelValue(pool) }),
      1,
    );
    return page.items.length === 0 ? 0 : 1;
  }

  async admit(
    reading: SpaceReading,
    rangePool: string,
    retire: readonly string[],
  ): Promise<AdmissionGuard | undefined> {
    const guard: AdmissionGuard = { space: reading.space, rangePool };
    if (reading.admitted.includes(rangePool) && !retire.some((r) => reading.admitted.includes(r))) return guard;
    for (const r of retire) if ((reading.held.get(r) ?? 0) === 0 && (await this.#held(r)) > 0) return undefined;
    const admitted = [...reading.admitted.filter((p) => !retire.includes(p) && p !== rangePool), rangePool];
    const name = spaceName(reading.space);
    if (reading.revision === 0) {
      const created = await this.#o.spaces.create(
        `admit range ${rangePool}`,
        spaceObject(name, reading.space, admitted),
      );
      return created.kind === 'created' ? guard : undefined;
    }
    const last = this.#versions.get(reading.space);
    const version = last?.revision === reading.revision ? last.version : String(reading.revision);
    const body = spaceObject(name, reading.space, admitted, version);
    const replaced = await this.#o.spaces.replace(`admit range ${rangePool}`, body);
    return replaced.kind === 'replaced' ? guard : undefined;
  }
}
