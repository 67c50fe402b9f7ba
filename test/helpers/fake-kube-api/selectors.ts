/**
 * Label and field selectors as the apiserver parses them. Label selectors: equality (`=`, `==`,
 * `!=`) and set-based (`in`, `notin`, `key`, `!key`) requirements joined by commas, all of which
 * must hold; a parse failure is a 400 `unable to parse requirement: ...` like labels.Parse's.
 * Field selectors: `=`, `==`, `!=` on the field labels the resource supports; any other label is
 * a 400 `field label not supported: <label>`.
 */
import { badRequest, unsupportedByFake } from './status.ts';
import type { KubeObject } from './types.ts';

export type LabelOp = '=' | '!=' | 'in' | 'notin' | 'exists' | '!exists';
export interface Requirement {
  readonly key: string;
  readonly op: LabelOp;
  readonly values: readonly string[];
}

type Token = { readonly kind: 'id' | 'op'; readonly text: string };

const SPECIAL = new Set(['=', '!', '(', ')', ',']);
const OPERATORS = new Set(['=', '==', '!=', '!', '(', ')', ',']);

function lex(selector: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < selector.length) {
    const ch = selector[i] as string;
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    if (SPECIAL.has(ch)) {
      // The longest known operator, as the apiserver's lexer reads them: "===" is "==" then "=".
      let text = ch;
      while (i + text.length < selector.length && OPERATORS.has(text + (selector[i + text.length] as string)))
        text += selector[i + text.length] as string;
      tokens.push({ kind: 'op', text });
      i += text.length;
      continue;
    }
    let text = '';
    while (i < selector.length && !SPECIAL.has(selector[i] as string) && !/\s/.test(selector[i] as string))
      text += selector[i++] as string;
    tokens.push({ kind: 'id', text });
  }
  return tokens;
}

const describe = (token: Token | undefined): string => (token === undefined ? 'EOS' : `'${token.text}'`);

export function parseLabelSelector(selector: string): Requirement[] {
  const tokens = lex(selector);
  const out: Requirement[] = [];
  let at = 0;
  const fail = (why: string): never => {
    throw badRequest(`unable to parse requirement: ${why}`);
  };
  const identifier = (): string => {
    const token = tokens[at];
    if (token?.kind !== 'id' || token.text === 'in' || token.text === 'notin')
      fail(`found ${describe(token)}, expected: identifier`);
    at++;
    return (token as Token).text;
  };
  while (at < tokens.length) {
    const first = tokens[at] as Token;
    if (first.kind === 'op' && first.text === '!') {
      at++;
      out.push({ key: identifier(), op: '!exists', values: [] });
    } else {
      const key = identifier();
      const op = tokens[at];
      if (op === undefined || (op.kind === 'op' && op.text === ',')) out.push({ key, op: 'exists', values: [] });
      else if (op.kind === 'id' && (op.text === 'in' || op.text === 'notin')) {
        at++;
        if (tokens[at]?.text !== '(') fail(`found ${describe(tokens[at])}, expected: '('`);
        at++;
        const values: string[] = [];
        while (tokens[at]?.text !== ')') {
          const value = tokens[at];
          if (value?.kind === 'id') {
            values.push(value.text);
            at++;
          } else if (value?.text === ',' && tokens[at - 1]?.text !== '(') at++;
          else fail(`found ${describe(value)}, expected: ',', ')' or identifier`);
        }
        at++;
        out.push({ key, op: op.text === 'in' ? 'in' : 'notin', values });
      } else if (op.kind === 'op' && ['=', '==', '!='].includes(op.text)) {
        at++;
        const value = tokens[at];
        let text = '';
        if (value?.kind === 'id') {
          text = value.text;
          at++;
        } else if (value !== undefined && value.text !== ',') fail(`found ${describe(value)}, expected: identifier`);
        out.push({ key, op: op.text === '!=' ? '!=' : '=', values: [text] });
      } else fail(`found ${describe(op)}, expected: in, notin, =, ==, !=, gt, lt`);
    }
    if (at < tokens.length) {
      if (tokens[at]?.text !== ',') fail(`found ${describe(tokens[at])}, expected: ','`);
      at++;
    }
  }
  return out;
}

export function labelsMatch(requirements: readonly Requirement[], labels: Record<string, string> | undefined): boolean {
  const own = labels ?? {};
  for (const r of requirements) {
    const value = Object.hasOwn(own, r.key) ? own[r.key] : undefined;
    switch (r.op) {
      case '=':
        if (value !== r.values[0]) return false;
        break;
      case '!=':
        if (value === r.values[0]) return false;
        break;
      case 'in':
        if (value === undefined || !r.values.includes(value)) return false;
        break;
      case 'notin':
        if (value !== undefined && r.values.includes(value)) return false;
        break;
      case 'exists':
        if (value === undefined) return false;
        break;
      case '!exists':
        if (value !== undefined) return false;
        break;
      default: {
        const never: never = r.op;
        throw new Error(`unknown selector op ${String(never)}`);
      }
    }
  }
  return true;
}

export type FieldTerm = { readonly key: string; readonly op: '=' | '!='; readonly value: string };

export function parseFieldSelector(selector: string, fields: ReadonlySet<string>): FieldTerm[] {
  if (selector.includes('\\')) throw unsupportedByFake('escaped characters in fieldSelector');
  return selector
    .split(',')
    .filter((term) => term.trim() !== '')
    .map((term) => {
      const match = /^([^!=]+)(==|!=|=)(.*)$/.exec(term.trim());
      if (match === null) throw badRequest(`invalid selector: '${selector}'; can't understand '${term}'`);
      const key = (match[1] as string).trim();
      if (!fields.has(key)) throw badRequest(`field label not supported: ${key}`);
      return { key, op: match[2] === '!=' ? '!=' : '=', value: (match[3] as string).trim() };
    });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function fieldValue(object: KubeObject, path: string): string {
  let value: unknown = object;
  for (const part of path.split('.')) value = isRecord(value) ? value[part] : undefined;
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? String(value) : '';
}

export interface Selection {
  readonly matches: (object: KubeObject) => boolean;
  /** Whether a label or field selector was given (remainingItemCount is only sent without). */
  readonly selective: boolean;
}

/** The objects a list or watch of `namespace` (all when undefined) with the query's selectors sees. */
export function selection(
  query: URLSearchParams,
  fields: ReadonlySet<string>,
  namespace: string | undefined,
  options: { setBased: boolean } = { setBased: true },
): Selection {
  const fieldTerms = parseFieldSelector(query.get('fieldSelector') ?? '', fields);
  const labels = parseLabelSelector(query.get('labelSelector') ?? '');
  const setBased = labels.find((r) => r.op === 'in' || r.op === 'notin');
  if (!options.setBased && setBased !== undefined)
    throw unsupportedByFake(`set-based label selectors on this resource ('${setBased.key} ${setBased.op} (...)')`);
  return {
    selective: fieldTerms.length > 0 || labels.length > 0,
    matches: (object) => {
      if (namespace !== undefined && object.metadata.namespace !== namespace) return false;
      for (const term of fieldTerms)
        if ((fieldValue(object, term.key) === term.value) !== (term.op === '=')) return false;
      return labelsMatch(labels, object.metadata.labels);
    },
  };
}
