/**
 * What a row of the settings table (settings/table.ts) is — a setting's flag, environment variable,
 * help, default and reader — and how one row is read: the flag, else the variable, else the
 * default, through the row's reader. Knows no particular setting.
 */
import type { Reader } from './readers.ts';

/** What a default may depend on: who runs the agent, from where, and its state directory. */
export interface DefaultContext {
  readonly uid: number;
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** The state directory chosen; asked only by the defaults that live in it. */
  readonly stateDir: () => string;
  /**
   * The socket the agent will listen on, its flag included, asked by the plugins directory that
   * goes beside it; without it (a client that knows no flag), the socket's own rule.
   */
  readonly socket?: () => string;
  /** Whether the Kubernetes source is on (--kubernetes), asked by the store's default; without it, off. */
  readonly kubernetes?: () => boolean;
  /** The store chosen (--store), asked by the node lease's default; without it, none. */
  readonly store?: () => string;
}

/** A default that depends on the context: what --help says it is, and the rule. */
export interface DefaultRule {
  readonly says: string;
  readonly of: (context: DefaultContext) => string;
}

/** One setting as the table states it. */
export interface SettingSpec {
  readonly flag: string;
  readonly env: string;
  /** What it is, for --help; the default is added from `default`. */
  readonly about: string;
  /**
   * The default, written as a flag would give it (so it passes the same reader and checks), or
   * a rule; none when the setting is optional or required.
   */
  readonly default?: string | DefaultRule;
  /** An empty environment variable is a value (netns dirs: none), not an unset one. */
  readonly emptyIsAValue?: boolean;
}

/** A row of the table: the setting, and how its text becomes the option's value. */
export interface Row<T> extends SettingSpec {
  /** Reads the given or defaulted text; a value of undefined leaves the option out. */
  readonly read: Reader<T>;
  /** The value when no flag, variable or default gives text; without it the option is left out. */
  readonly unset?: T;
}

/** The help line of a setting, generated from its default. */
export function helpOf(spec: SettingSpec): string {
  if (spec.default === undefined) return spec.about;
  return `${spec.about}; default ${typeof spec.default === 'string' ? spec.default : spec.default.says}`;
}

/** The text a flag or the environment gives a setting; undefined when neither does. */
export function givenText(spec: SettingSpec, flag: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  const fromEnv = env[spec.env];
  return flag ?? (spec.emptyIsAValue === true ? fromEnv : fromEnv || undefined);
}

/** A setting's default in the given context, as a flag would give it. */
export function defaultOf(setting: { readonly default: string | DefaultRule }, context: DefaultContext): string {
  return typeof setting.default === 'string' ? setting.default : setting.default.of(context);
}

/**
 * A row's value: the flag's text, else the variable's, else the default's, through the row's
 * reader; the row's unset value when none gives text (undefined: the option is left out).
 */
export function readRow<T>(row: Row<T>, flag: string | undefined, context: DefaultContext): T | undefined {
  const given = givenText(row, flag, context.env);
  const text = given ?? (row.default === undefined ? undefined : defaultOf({ default: row.default }, context));
  return text === undefined ? row.unset : row.read(text, { flag: row.flag, env: row.env, cwd: context.cwd });
}
