// Configuration beyond flags, generic over commander's options: every option of every command can
// also come from an environment variable or a `--config` file (YAML or JSON). An option added later
// to any command is covered without touching this file.
//
//   precedence   flag > env > file > default (a value's source is commander's getOptionValueSource:
//                'cli', 'env', 'config', 'default' or undefined when unset)
//   env names    HEADROOM_<FLAG> for `serve` (the default command: HEADROOM_SLO_MS, HEADROOM_NO_METRICS);
//                HEADROOM_<COMMAND PATH>_<FLAG> for the others (HEADROOM_BENCH_RUN_URL), so that
//                `bench run --model` (a model name) never picks up serve's HEADROOM_MODEL (a file)
//   file keys    the flag's name (`slo-ms`, `no-metrics`) or its camelCase (`sloMs`, `noMetrics`); the
//                value of a negated flag may also be given positively (`metrics: false`)
//   booleans     true/false, 1/0, yes/no, on/off; anything else is an error
//   secrets      values of options named like a secret are redacted on /stats, and so is the
//                password of any URL value (`--flow-redis-url redis://:pw@host`)
//
// Every bad value and every unknown file key is a UserError naming the key and where it came from.
// Mandatory options are checked here, after env and file, instead of by commander (which checks
// before either is read).
import type { Command, Option } from 'commander';
import { redactUrlPassword } from '../util/redact-url.ts';
import { UserError } from './user-error.ts';

/** Where a value came from, as /stats reports it. */
export type ConfigSource = 'flag' | 'env' | 'file' | 'default';

export interface ConfigEntry {
  readonly value: unknown;
  readonly source: ConfigSource;
}

/** The effective configuration of one command: each option's value and source; secrets redacted. */
export interface EffectiveConfig {
  /** The --config file read, if any. */
  readonly file: string | null;
  /** Keyed by flag name (a negated flag by its positive name: `metrics`). */
  readonly options: Readonly<Record<string, ConfigEntry>>;
}

/** Options that configure the command line itself, never read from env or a file. */
const SKIPPED = new Set(['help', 'version', 'config']);
/** Option names (last word) whose values /stats redacts. */
const SECRET = /(^|-)(api-?keys?|keys?|secrets?|passwords?|token|credentials?|auth|authorization|headers?)$/;

/** Where each value set from env or a file came from, for error messages: attribute → `HEADROOM_X` or `file.yaml: key`. */
const origins = new WeakMap<Command, Map<string, string>>();
const mandatory = new WeakSet<Option>();

/** Adds --config to every leaf command and takes over commander's mandatory-option check. Call once, after registering. */
export function prepareConfig(program: Command): void {
  for (const cmd of leafCommands(program)) {
    cmd.option('--config <file>', `read options from this YAML or JSON file (keys as flags or camelCase; flag > env ${envPrefix(cmd)}<FLAG> > file > default)`);
    for (const opt of cmd.options) {
      if (!opt.mandatory) continue;
      mandatory.add(opt);
      opt.mandatory = false;
    }
  }
}

/** Fills options not given as flags from the environment, then from the --config file; checks mandatory ones. */
export async function applyConfig(cmd: Command, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const from = new Map<string, string>();
  origins.set(cmd, from);
  for (const opt of configurable(cmd)) {
    const name = envName(cmd, opt);
    const raw = env[name];
    if (raw === undefined || !unset(cmd, opt)) continue;
    set(cmd, opt, convert(opt, raw, name), 'env', name, from);
  }
  const file = configFile(cmd, env);
  if (file !== null) await applyFile(cmd, file, from);
  for (const opt of cmd.options) {
    if (mandatory.has(opt) && cmd.getOptionValue(opt.attributeName()) === undefined) {
      throw new UserError(`required option '${opt.flags}' not specified (or set ${envName(cmd, opt)}, or '${opt.name()}' in --config)`);
    }
  }
}

/** The effective configuration of `cmd` after parsing, for /stats. */
export function effectiveConfig(cmd: Command): EffectiveConfig {
  const options: Record<string, ConfigEntry> = {};
  for (const opt of configurable(cmd)) {
    const key = opt.negate ? opt.name().slice(3) : opt.name();
    if (key in options && cmd.getOptionValueSource(opt.attributeName()) === undefined) continue;
    const value = cmd.getOptionValue(opt.attributeName()) as unknown;
    options[key] = { value: SECRET.test(key) && value !== undefined ? '<redacted>' : (redactUrlPassword(value) ?? null), source: sourceOf(cmd, opt) };
  }
  const file = cmd.getOptionValue('config') as string | undefined;
  return { file: file ?? null, options };
}

/** ` (from HEADROOM_X)` or ` (from file.yaml: key)` when the flag named in `message` (`--flag: ...`) was not given on the command line. */
export function originNote(cmd: Command, message: string): string {
  const m = /^--([a-z0-9-]+)/.exec(message);
  if (m === null) return '';
  const opt = cmd.options.find((o) => o.name() === m[1]);
  const where = opt === undefined ? undefined : origins.get(cmd)?.get(opt.attributeName());
  return where === undefined ? '' : ` (from ${where})`;
}

/** The environment variable for `opt` of `cmd`. */
export function envName(cmd: Command, opt: Option): string {
  return `${envPrefix(cmd)}${opt.name()}`.toUpperCase().replace(/-/g, '_');
}

function envPrefix(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent != null; c = c.parent) names.unshift(c.name());
  // serve is the default command: its variables carry no command name.
  const path = names.length === 1 && names[0] === 'serve' ? [] : names;
  return ['HEADROOM', ...path, ''].join('_').toUpperCase().replace(/-/g, '_');
}

function leafCommands(cmd: Command): Command[] {
  return cmd.commands.length === 0 ? [cmd] : cmd.commands.flatMap(leafCommands);
}

function configurable(cmd: Command): Option[] {
  return cmd.options.filter((o) => !SKIPPED.has(o.name()));
}

function unset(cmd: Command, opt: Option): boolean {
  const s = cmd.getOptionValueSource(opt.attributeName());
  return s === undefined || s === 'default' || s === 'implied';
}

function sourceOf(cmd: Command, opt: Option): ConfigSource {
  const s = cmd.getOptionValueSource(opt.attributeName());
  return s === 'cli' ? 'flag' : s === 'env' ? 'env' : s === 'config' ? 'file' : 'default';
}

function set(cmd: Command, opt: Option, value: unknown, source: 'env' | 'config', where: string, from: Map<string, string>): void {
  cmd.setOptionValueWithSource(opt.attributeName(), value, source);
  from.set(opt.attributeName(), where);
}

function configFile(cmd: Command, env: NodeJS.ProcessEnv): string | null {
  const flag = cmd.getOptionValue('config') as string | undefined;
  if (flag !== undefined) return flag;
  const opt = cmd.options.find((o) => o.name() === 'config');
  const fromEnv = opt === undefined ? undefined : env[envName(cmd, opt)];
  if (fromEnv === undefined || fromEnv === '') return null;
  cmd.setOptionValueWithSource('config', fromEnv, 'env');
  return fromEnv;
}

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);

/**
 * A raw value (env string, or a file's scalar or list) as the option's attribute value; `positive`
 * for a negated flag's positive key. A list option (`<names...>`, or a repeatable one) takes a
 * file's list, or a comma-separated string, item by item as its flag would.
 */
function convert(opt: Option, raw: unknown, where: string, positive = false): unknown {
  if (isList(opt)) {
    const items = Array.isArray(raw) ? raw.map((x) => String(x)) : String(raw).split(',').map((x) => x.trim()).filter((x) => x !== '');
    if (opt.parseArg === undefined) return items;
    return items.reduce<unknown>((prev, item) => parse(opt, item, prev, where), opt.defaultValue);
  }
  if (isFlag(opt)) {
    const s = String(raw).trim().toLowerCase();
    const b = raw === true || TRUE.has(s) ? true : raw === false || FALSE.has(s) ? false : null;
    if (b === null) throw new UserError(`${where}: expected true or false, got '${String(raw)}'`);
    return opt.negate && !positive ? !b : b;
  }
  if (raw !== null && typeof raw === 'object') throw new UserError(`${where}: expected a single value, got ${JSON.stringify(raw)}`);
  return parse(opt, String(raw), opt.defaultValue as unknown, where);
}

function parse(opt: Option, raw: string, previous: unknown, where: string): unknown {
  if (opt.parseArg === undefined) return raw;
  try {
    return opt.parseArg(raw, previous);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const text = message.replace(/^error: /, '');
    throw new UserError(`${where}: ${text}${text.includes(`'${raw}'`) ? '' : ` (got '${raw}')`}`);
  }
}

async function applyFile(cmd: Command, file: string, from: Map<string, string>): Promise<void> {
  const values = await readConfigFile(file);
  const byKey = new Map<string, { opt: Option; positive: boolean }>();
  for (const opt of configurable(cmd)) {
    byKey.set(opt.name(), { opt, positive: false });
    byKey.set(camel(opt.name()), { opt, positive: false });
    if (opt.negate && !cmd.options.some((o) => o !== opt && o.attributeName() === opt.attributeName())) {
      byKey.set(opt.name().slice(3), { opt, positive: true });
      byKey.set(opt.attributeName(), { opt, positive: true });
    }
  }
  for (const [key, raw] of Object.entries(values)) {
    const hit = byKey.get(key);
    if (hit === undefined) throw new UserError(`${file}: unknown key '${key}'${suggestion(key, [...byKey.keys()])}`);
    // A key with no value (YAML `key:` or `~`, JSON null) leaves the option at its default.
    if (raw === null || !unset(cmd, hit.opt)) continue;
    const where = `${file}: ${key}`;
    set(cmd, hit.opt, convert(hit.opt, raw, where, hit.positive), 'config', where, from);
  }
}

async function readConfigFile(file: string): Promise<Record<string, unknown>> {
  const { readFile } = await import('node:fs/promises');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UserError(code === 'ENOENT' ? `--config: no such file: ${file}` : `--config: cannot read ${file} (${code ?? String(err)})`, { cause: err });
  }
  let doc: unknown;
  try {
    if (/\.json$/i.test(file)) doc = JSON.parse(text);
    else doc = (await import('yaml')).parse(text);
  } catch (err) {
    const message = (err instanceof Error ? err.message : String(err)).split('\n')[0];
    throw new UserError(`${file}: not valid ${/\.json$/i.test(file) ? 'JSON' : 'YAML'}: ${message}`, { cause: err });
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new UserError(`${file}: expected a mapping of option names to values`);
  return doc as Record<string, unknown>;
}

/** An option that holds a list: variadic (`<names...>`) or repeatable (a default list its parser appends to). */
function isList(opt: Option): boolean {
  return !isFlag(opt) && (opt.variadic || Array.isArray(opt.defaultValue));
}

/** A flag without a value (`--ctx-beyond-trained`, `--no-metrics`); commander's isBoolean() leaves out negated ones. */
function isFlag(opt: Option): boolean {
  return !opt.required && !opt.optional;
}

function camel(flag: string): string {
  return flag.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** ` (did you mean 'x'?)` for the closest candidate within edit distance 3, else ''. */
export function suggestion(word: string, candidates: readonly string[]): string {
  let best: string | null = null;
  let bestDistance = 4;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best === null ? '' : ` (did you mean '${best}'?)`;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row.push(Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    prev = row;
  }
  return prev[b.length]!;
}
