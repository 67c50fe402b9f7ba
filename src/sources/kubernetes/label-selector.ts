/**
 * Kubernetes' LabelSelector (`matchLabels`, `matchExpressions` with In, NotIn, Exists and
 * DoesNotExist), read from an object's spec and matched against a set of labels, with the meaning
 * the API server gives it (apimachinery's LabelSelectorAsSelector):
 * - every requirement must hold (matchLabels entries are `In` with one value);
 * - an empty selector (`{}`) matches everything; an absent one is the caller's to interpret;
 * - `NotIn` and `DoesNotExist` hold for labels that are absent.
 * Pure: no I/O. A malformed selector is refused with the path of what is wrong, never half-read.
 */
import { isPlainObject } from '../../core/validate.ts';

export type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface LabelRequirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  readonly values: readonly string[];
}

export interface LabelSelector {
  readonly requirements: readonly LabelRequirement[];
}

const OPERATORS: ReadonlySet<string> = new Set(['In', 'NotIn', 'Exists', 'DoesNotExist']);

/** The selector written at `path`, or a message saying what is wrong with it. */
export function parseLabelSelector(value: unknown, path: string): LabelSelector | string {
  if (!isPlainObject(value)) return `${path} must be an object (matchLabels, matchExpressions)`;
  const requirements: LabelRequirement[] = [];
  const { matchLabels, matchExpressions } = value;
  if (matchLabels !== undefined) {
    if (!isPlainObject(matchLabels)) return `${path}.matchLabels must be an object of label values`;
    for (const [key, v] of Object.entries(matchLabels)) {
      if (typeof v !== 'string') return `${path}.matchLabels.${key} must be a string`;
      requirements.push({ key, operator: 'In', values: [v] });
    }
  }
  if (matchExpressions !== undefined) {
    if (!Array.isArray(matchExpressions)) return `${path}.matchExpressions must be a list`;
    for (const [i, e] of matchExpressions.entries()) {
      const at = `${path}.matchExpressions[${i}]`;
      if (!isPlainObject(e) || typeof e.key !== 'string' || e.key === '') return `${at} needs a key`;
      if (typeof e.operator !== 'string' || !OPERATORS.has(e.operator))
        return `${at}.operator must be In, NotIn, Exists or DoesNotExist`;
      const operator = e.operator as SelectorOperator;
      const values = e.values ?? [];
      if (!Array.isArray(values) || values.some((v) => typeof v !== 'string'))
        return `${at}.values must be a list of strings`;
      const set = operator === 'In' || operator === 'NotIn';
      // As the API server validates it: In and NotIn need values, Exists and DoesNotExist take none.
      if (set && values.length === 0) return `${at}.values must not be empty for ${operator}`;
      if (!set && values.length > 0) return `${at}.values must be empty for ${operator}`;
      requirements.push({ key: e.key, operator, values: values as string[] });
    }
  }
  return { requirements };
}

/** Whether `labels` satisfy every requirement of `selector`. */
export function selectorMatches(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  return selector.requirements.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    switch (r.operator) {
      case 'In':
        return has && r.values.includes(labels[r.key] as string);
      case 'NotIn':
        return !has || !r.values.includes(labels[r.key] as string);
      case 'Exists':
        return has;
      case 'DoesNotExist':
        return !has;
      default: {
        const never: never = r.operator;
        throw new Error(`unhandled selector operator ${String(never)}`);
      }
    }
  });
}

/** The selector as kubectl would write it (`zone in (a,b),!gpu`), for messages. */
export function formatSelector(selector: LabelSelector): string {
  if (selector.requirements.length === 0) return '(everything)';
  return selector.requirements
    .map((r) => {
      switch (r.operator) {
        case 'In':
          return r.values.length === 1 ? `${r.key}=${r.values[0]}` : `${r.key} in (${r.values.join(',')})`;
        case 'NotIn':
          return `${r.key} notin (${r.values.join(',')})`;
        case 'Exists':
          return r.key;
        default:
          return `!${r.key}`;
      }
    })
    .join(',');
}
