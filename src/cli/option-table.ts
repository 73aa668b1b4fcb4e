// One declarative table of options per command: each option is written once — flags, help,
// parser, default — and the commander options, the typed values the command reads and the checks
// at start-up are all made from it. The environment variable and the --config key of an option
// come from its name by one rule for every command (config.ts: HEADROOM_<FLAG>, `flag-name` or
// `flagName`), so the table needs no column for them.
//
//   const SERVE_OPTIONS = [opt('--slo-ms <ms>', 'default budget', intAtLeast1, { default: '10000' }), ...];
//   addOptions(cmd, SERVE_OPTIONS, 'at-start');
//   const f = readOptions(cmd, SERVE_OPTIONS);   // f.sloMs: number
//
// A bad value is one line naming the flag, before the command does anything, checked either
//   'on-parse'  by commander, as it reads the flags (its message: "option '--rate <rps>' argument
//               'abc' is invalid. expected a number, got 'abc'"); env and file values through the
//               same parser (config.ts). The parsed value is what commander stores.
//   'at-start'  by readOptions, the command's first step ("--port: expected an integer, got 'abc'",
//               config.ts's originNote adds "(from HEADROOM_PORT)"). Commander stores the text as
//               given, so /stats shows each option as it was written (serve and gateway).
// Choices are commander's in both (it lists them in --help and in its message).
import { InvalidArgumentError, Option } from 'commander';
import type { Command } from 'commander';
import { bug } from '../util/bug.ts';
import type { Parser } from './option-parsers.ts';
import { UserError } from './user-error.ts';

export type Check = 'on-parse' | 'at-start';

declare const VALUE: unique symbol;

/** One option of one command, as the table declares it. */
export interface OptionSpec<Key extends string = string, Value = unknown> {
  /** Commander's flags: `--slo-ms <ms>`, `--no-metrics`, `--served-model-name <names...>`, `--report [file]`. */
  readonly flags: string;
  /** The long name without dashes (`slo-ms`, `no-metrics`): what errors name; env and file keys derive from it. */
  readonly name: string;
  /** The value's key in readOptions' result: commander's attribute name (`sloMs`; `metrics` for `--no-metrics`). */
  readonly key: Key;
  readonly help: string;
  /** value: `<v>`; optional: `[v]` (true when given bare); list: `<v...>` or repeated; flag: no value; choice: one of `choices`. */
  readonly kind: 'value' | 'optional' | 'list' | 'flag' | 'choice';
  /** Parses one value (one item of a list); null for flags and choices. */
  readonly parse: Parser<unknown> | null;
  readonly choices: readonly string[] | null;
  /** The default as one would type it, parsed like a given value; null: none (a flag's is false, a negated flag's true). */
  readonly defaultText: string | null;
  /** list: given once per item (`--upstream a --upstream b`), not variadic (`<names...>`). */
  readonly repeatable: boolean;
  /** Repeatable list: an env variable or file key gives one item, never a list split at commas (a header value may hold commas). */
  readonly oneItemFromConfig: boolean;
  /** Must be given (flag, env or file; config.ts checks it after reading those). */
  readonly required: boolean;
  /** The type readOptions gives this option's value (only declared, never set). */
  readonly [VALUE]?: Value;
}

type LongName<F extends string> = F extends `--${infer Rest}` ? (Rest extends `${infer N} ${string}` ? N : Rest) : never;
type Camel<S extends string> = S extends `${infer A}-${infer B}` ? `${A}${Capitalize<Camel<B>>}` : S;
/** `sloMs` for `--slo-ms <ms>`, `metrics` for `--no-metrics`: commander's attribute name, as a type. */
export type KeyOf<F extends string> = LongName<F> extends `no-${infer P}` ? Camel<P> : Camel<LongName<F>>;

type ValueOf<S> = S extends OptionSpec<string, infer V> ? V : never;
/** What readOptions returns for a table: each option's parsed value under its key. */
export type OptionValues<S extends readonly OptionSpec[]> = { readonly [E in S[number] as E['key']]: ValueOf<E> };

const NO_SPEC = { parse: null, choices: null, defaultText: null, repeatable: false, oneItemFromConfig: false, required: false } as const;

function spec<K extends string, V>(flags: string, help: string, kind: OptionSpec['kind'], rest: Partial<Pick<OptionSpec, 'parse' | 'choices' | 'defaultText' | 'repeatable' | 'oneItemFromConfig' | 'required'>>): OptionSpec<K, V> {
  const name = /^--([a-z0-9-]+)/.exec(flags)?.[1] ?? bug(`option table: expected flags starting with --name, got '${flags}'`);
  const key = name.replace(/^no-/, '').replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
  return { ...NO_SPEC, flags, name, key: key as K, help, kind, ...rest };
}

/** An option that takes one value: typed T when it has a default or is required, else T | undefined. */
export function opt<const F extends string, T>(flags: F, help: string, parse: Parser<T>, o: { readonly default: string } | { readonly required: true }): OptionSpec<KeyOf<F>, T>;
export function opt<const F extends string, T>(flags: F, help: string, parse: Parser<T>): OptionSpec<KeyOf<F>, T | undefined>;
export function opt(flags: string, help: string, parse: Parser<unknown>, o: { readonly default?: string; readonly required?: true } = {}): OptionSpec {
  return spec(flags, help, 'value', { parse, defaultText: o.default ?? null, required: o.required === true });
}

/** `--flag [value]`: the parsed value when one is given, true when the flag is given bare, undefined when not given. */
export function optionalValue<const F extends string, T>(flags: F, help: string, parse: Parser<T>): OptionSpec<KeyOf<F>, T | true | undefined> {
  return spec(flags, help, 'optional', { parse });
}

/** One of `choices` (commander checks it and lists them in --help). */
export function choice<const F extends string, const C extends readonly string[]>(flags: F, help: string, choices: C, dflt: C[number]): OptionSpec<KeyOf<F>, C[number]> {
  return spec(flags, help, 'choice', { choices, defaultText: dflt });
}

/** A flag without a value: false unless given; `--no-x` is true unless given. */
export function flag<const F extends string>(flags: F, help: string): OptionSpec<KeyOf<F>, boolean> {
  return spec(flags, help, 'flag', {});
}

/** Several values, each parsed by `parse`: variadic (`<names...>`) or, with `repeatable`, one per flag; [] when none. */
export function list<const F extends string, T>(flags: F, help: string, parse: Parser<T>, o: { readonly repeatable?: true; readonly oneItemFromConfig?: true } = {}): OptionSpec<KeyOf<F>, T[]> {
  return spec(flags, help, 'list', { parse, repeatable: o.repeatable === true, oneItemFromConfig: o.oneItemFromConfig === true });
}

const checkOf = new WeakMap<Command, Check>();

/** Registers every option of `table` on `cmd`, in order; a command's options are all checked the same way. */
export function addOptions(cmd: Command, table: readonly OptionSpec[], check: Check): Command {
  if ((checkOf.get(cmd) ?? check) !== check) bug(`option table: ${cmd.name()} mixes 'on-parse' and 'at-start' options`);
  checkOf.set(cmd, check);
  for (const s of table) cmd.addOption(commanderOption(s, check));
  return cmd;
}

function commanderOption(s: OptionSpec, check: Check): Option {
  const o = new Option(s.flags, s.help);
  if (o.attributeName() !== s.key) bug(`option table: ${s.flags} is stored as ${o.attributeName()}, not ${s.key}`);
  if (s.required) o.makeOptionMandatory();
  const parse = check === 'on-parse' ? s.parse : null;
  switch (s.kind) {
    case 'flag':
      // A negated flag's default (true) is commander's own.
      if (!o.negate) o.default(false);
      break;
    case 'choice':
      o.choices(s.choices ?? []).default(s.defaultText);
      break;
    case 'value':
    case 'optional':
      if (parse !== null) o.argParser(parse);
      if (s.defaultText !== null) {
        if (parse === null) o.default(s.defaultText);
        else o.default(parse(s.defaultText), s.defaultText);
      }
      break;
    case 'list': {
      // An item is added to the items given before it: commander's own collecting stops at a parser.
      const item: Parser<unknown> = parse ?? ((v) => v);
      if (parse !== null || s.repeatable) o.argParser((v: string, previous: unknown[] | undefined) => [...(previous ?? []), item(v)]);
      // An empty default list is what makes config.ts read env and file values as lists.
      if (s.repeatable && !s.oneItemFromConfig) o.default([]);
      break;
    }
  }
  return o;
}

/** The command's option values, typed by its table; 'at-start': each is parsed here, the first bad one a UserError naming its flag. */
export function readOptions<const S extends readonly OptionSpec[]>(cmd: Command, table: S): OptionValues<S> {
  const check = checkOf.get(cmd) ?? bug(`option table: readOptions on ${cmd.name()}, whose options were not added by addOptions`);
  const values: Record<string, unknown> = {};
  for (const s of table) values[s.key] = readOne(s, cmd.getOptionValue(s.key) as unknown, check);
  return values as OptionValues<S>;
}

function readOne(s: OptionSpec, stored: unknown, check: Check): unknown {
  if (s.kind === 'list') {
    const items = (stored ?? []) as unknown[];
    return check === 'at-start' ? items.map((item) => parseAtStart(s, item)) : items;
  }
  if (check === 'on-parse' || s.parse === null || stored === undefined || stored === true) return stored;
  return parseAtStart(s, stored);
}

/** `stored` is the text commander kept: a flag's, an env variable's, or a file's value as config.ts wrote it. */
function parseAtStart(s: OptionSpec, stored: unknown): unknown {
  const text = typeof stored === 'string' ? stored : bug(`option table: --${s.name} stored ${typeof stored}, not its text`);
  try {
    return s.parse!(text);
  } catch (err) {
    if (err instanceof InvalidArgumentError) throw new UserError(`--${s.name}: ${err.message}`, { cause: err });
    throw err;
  }
}
