/**
 * The values a metric label may take, so that a scrape's page stays bounded whatever callers send:
 * `command` and `code` fold anything outside the spec's closed lists into `invalid` and `other`;
 * a label whose values come from callers (`pool`, `network`) keeps its first `max` distinct values
 * and folds every later one into `_other` (`BoundedLabel`). No label ever takes a container ID, an
 * address or a pod.
 */
import { type CniCommand, COMMANDS as CNI_COMMANDS } from '../../cni/spec.ts';

/** The label value that stands for every value past the bound. */
export const OTHER = '_other';

/** A label whose values come from callers: the first `max` distinct values, then `_other`. */
export class BoundedLabel {
  readonly #max: number;
  readonly #seen = new Set<string>();

  constructor(max: number) {
    this.#max = max;
  }

  of(value: string): string {
    if (this.#seen.has(value)) return value;
    if (this.#seen.size >= this.#max) return OTHER;
    this.#seen.add(value);
    return value;
  }
}

const COMMANDS: ReadonlySet<string> = new Set<CniCommand>(CNI_COMMANDS);

/** The spec's commands as sent; anything else (a bad request) is `invalid`. */
export function commandLabel(command: string): string {
  return COMMANDS.has(command) ? command : 'invalid';
}

/** CNI codes are small integers (0 success, 1–7, 11, 50, 100+ Warren's own). */
export function codeLabel(code: number): string {
  return Number.isInteger(code) && code >= 0 && code < 1000 ? String(code) : 'other';
}
