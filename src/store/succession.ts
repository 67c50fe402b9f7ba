/**
 * A node file's succession: its place among the histories of its node's file (the rules:
 * tiered/lineage.ts). Kept in the file (sqlite/schema.ts) and carried by its publications
 * (PublishedBlock.succession), read back from either through `successionOf`.
 */

/** The lineages a file took over and a generation above theirs. */
export interface Succession {
  /** Above the generation of every lineage it took over; 0 for a file that took none over. */
  readonly generation: number;
  /** The lineages it took over (and theirs), the latest first: at most SUCCESSION_LIMIT. */
  readonly supersedes: readonly string[];
}

/** The lineages a succession keeps: a copy older than that many losses is taken for an unrelated history. */
export const SUCCESSION_LIMIT = 16;

/** The longest lineage a succession names (a lineage is a UUID: 36). */
const LINEAGE_MAX = 64;

export const NO_SUCCESSION: Succession = { generation: 0, supersedes: [] };

/** `value` as a succession (read from a publication or a file); undefined for anything else. */
export function successionOf(value: unknown): Succession | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { generation, supersedes } = value as Record<string, unknown>;
  if (typeof generation !== 'number' || !Number.isSafeInteger(generation) || generation < 0) return undefined;
  if (!Array.isArray(supersedes) || supersedes.length > SUCCESSION_LIMIT) return undefined;
  const named = supersedes.filter((l): l is string => typeof l === 'string' && l.length > 0 && l.length <= LINEAGE_MAX);
  return named.length === supersedes.length ? { generation, supersedes: named } : undefined;
}

/** Whether `s` names nothing taken over (what a publication leaves out). */
export const noSuccession = (s: Succession | undefined): boolean =>
  s === undefined || (s.generation === 0 && s.supersedes.length === 0);
