/**
 * Which runtime answers for which network namespaces, so that no adapter can speak for another
 * runtime's containers. A registered runtime adapter declares path prefixes with each listing; an
 * allocation whose namespace begins with one is judged on that adapter's word, and containerd's
 * resync leaves it alone. So a prefix is refused when it overlaps:
 * - what containerd answers for while its source is on: its CRI's sandbox namespaces, which it
 *   names /var/run/netns/cni-<uuid> (/run/netns/cni-<uuid> where /var/run is /run);
 * - a prefix another adapter declared. The first to declare keeps it, also after it goes away
 *   (its allocations stay its own until it comes back), and the same adapter may declare again.
 * Two prefixes overlap when one begins with the other, in any of their spellings (as written, and
 * with links resolved: /var/run/netns/ and /run/netns/ are one directory on nearly every host).
 *
 * What the adapters declared is also what allocations are judged by: an adapter's resync looks
 * only at what it answers for, containerd's at none of that (`judgedBy`), and the CNI service asks
 * which adapter answers for an allocation (`adapterOf`). One instance serves the registry's
 * handler and the release pipeline, so the two never disagree on whose a namespace is.
 */
import { realpathSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Allocation } from '../../ipam/allocation.ts';
import { type RuntimeAdapterScope, answersFor } from './intent.ts';

/** The namespaces containerd's CRI makes for its sandboxes, in both spellings. */
export const CONTAINERD_CRI_NETNS_PREFIXES: readonly string[] = ['/var/run/netns/cni-', '/run/netns/cni-'];

/** Who answers for some prefixes whatever adapters declare (containerd, when its source is on). */
export interface ReservedScope {
  readonly owner: string;
  readonly prefixes: readonly string[];
}

export class NetnsScopes {
  /** Prefixes no adapter may overlap, with who answers for them. */
  readonly #reserved: readonly ReservedScope[];
  /** What each adapter declared last, by adapter name; kept after it goes (see the header). */
  readonly #claims = new Map<string, readonly string[]>();

  constructor(reserved: readonly ReservedScope[]) {
    this.#reserved = reserved;
  }

  /**
   * Records `prefixes` as `adapter`'s, or says why not (nothing is recorded then): the first
   * overlap found, naming both prefixes and who answers for the other.
   */
  claim(adapter: string, prefixes: readonly string[]): string | undefined {
    const others = [
      ...this.#reserved,
      ...[...this.#claims]
        .filter(([name]) => name !== adapter)
        .map(([name, p]) => ({ owner: `the runtime adapter ${JSON.stringify(name)}`, prefixes: p })),
    ];
    for (const prefix of prefixes) {
      for (const other of others) {
        const clash = other.prefixes.find((p) => overlap(prefix, p));
        if (clash !== undefined) {
          return (
            `netns prefix ${JSON.stringify(prefix)} overlaps ${JSON.stringify(clash)}, which ${other.owner} ` +
            `answers for; an adapter may declare only its own runtime's namespaces`
          );
        }
      }
    }
    this.#claims.set(adapter, [...prefixes]);
    return undefined;
  }

  /**
   * Records `scope` as its adapter's without the overlap check: for a listing claimed already
   * (a resync that follows its claim), or an adapter's word in a test of the pipeline.
   */
  declare(scope: RuntimeAdapterScope): void {
    this.#claims.set(scope.adapter, [...scope.netnsPrefixes]);
  }

  /** Which adapter answers for an allocation, by what adapters have declared (undefined: none). */
  adapterOf(a: Allocation): string | undefined {
    for (const [adapter, netnsPrefixes] of this.#claims) if (answersFor({ adapter, netnsPrefixes }, a)) return adapter;
    return undefined;
  }

  /**
   * Whether a resync by `via` judges `a`: an adapter's judges only what it answers for;
   * containerd's (no `via`) only what no adapter has said is its own.
   */
  judgedBy(a: Allocation, via: RuntimeAdapterScope | undefined): boolean {
    return via === undefined ? this.adapterOf(a) === undefined : answersFor(via, a);
  }
}

/** Whether one prefix begins with the other in any spelling of either. */
export function overlap(a: string, b: string): boolean {
  const bs = spellings(b);
  for (const x of spellings(a)) for (const y of bs) if (x.startsWith(y) || y.startsWith(x)) return true;
  return false;
}

/** A prefix as written, its whole path resolved (when it names something), and its directory resolved. */
function spellings(prefix: string): string[] {
  const out = new Set([prefix]);
  const trailing = prefix.endsWith('/') ? '/' : '';
  const whole = realOrUndefined(prefix);
  if (whole !== undefined) out.add(whole === '/' ? '/' : whole + trailing);
  const dir = realOrUndefined(dirname(prefix));
  if (dir !== undefined && !prefix.endsWith('/')) out.add(`${dir === '/' ? '' : dir}/${basename(prefix)}`);
  return [...out];
}

function realOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}
