// Value parsers for the option tables (option-table.ts): each turns the text of one value into
// what the command reads, or throws commander's InvalidArgumentError with "expected X, got 'v'" —
// one line, which commander prints naming the flag (checked on parse) or option-table.ts prefixes
// with the flag (checked at start). A parser judges one value alone: checks across options stay
// with the command that reads them, and so do checks that touch the filesystem beyond "exists".
//
// Numbers are judged in two steps, so the message says what was wrong: not a number ("expected a
// number"/"expected an integer"), then out of range ("expected an integer ≥ 1").
import { statSync } from 'node:fs';
import { InvalidArgumentError } from 'commander';

/** Turns the text of one value into the option's value, or throws InvalidArgumentError. */
export type Parser<T> = (text: string) => T;

function expected(what: string, text: string): never {
  throw new InvalidArgumentError(`expected ${what}, got '${text}'`);
}

/** A finite number; with `ok`, one it accepts ("expected <what>" otherwise). */
export function num(what = 'a number', ok: (n: number) => boolean = () => true): Parser<number> {
  return numeric('a number', Number.isFinite, what, ok);
}

/** An integer; with `ok`, one it accepts ("expected <what>" otherwise). */
export function int(what = 'an integer', ok: (n: number) => boolean = () => true): Parser<number> {
  return numeric('an integer', Number.isInteger, what, ok);
}

function numeric(kind: string, isKind: (n: number) => boolean, what: string, ok: (n: number) => boolean): Parser<number> {
  return (text) => {
    const n = Number(text);
    if (text.trim() === '' || !isKind(n)) expected(kind, text);
    if (!ok(n)) expected(what, text);
    return n;
  };
}

export const anyNumber = num();
export const anyInt = int();
export const positiveNumber = num('a positive number', (n) => n > 0);
export const numberAtLeast0 = num('a number ≥ 0', (n) => n >= 0);
export const intAtLeast0 = int('an integer ≥ 0', (n) => n >= 0);
export const intAtLeast1 = int('an integer ≥ 1', (n) => n >= 1);
export const port = int('a port in [0, 65535]', (n) => n >= 0 && n <= 65535);

/** A number in [lo, hi], (lo, hi], ... as `interval` writes it. */
export function numberIn(interval: `${'[' | '('}${number}, ${number}${']' | ')'}`): Parser<number> {
  const m = /^([[(])(.+), (.+)([\])])$/.exec(interval)!;
  const lo = Number(m[2]);
  const hi = Number(m[3]);
  return num(`a number in ${interval}`, (n) => (m[1] === '[' ? n >= lo : n > lo) && (m[4] === ']' ? n <= hi : n < hi));
}

/** One of `words` as given, or what `parse` makes of the text; any failure says "expected <what>". */
export function orWords<const W extends string, T>(words: readonly W[], parse: Parser<T>, what: string): Parser<W | T> {
  return (text) => {
    if ((words as readonly string[]).includes(text)) return text as W;
    try {
      return parse(text);
    } catch {
      return expected(what, text);
    }
  };
}

/** One of `words` ("expected a or b"): for an option whose choices are not commander's (its message is pinned). */
export function oneOf<const W extends string>(words: readonly W[]): Parser<W> {
  const what = words.length === 2 ? `${words[0]} or ${words[1]}` : `one of ${words.join(', ')}`;
  return (text) => ((words as readonly string[]).includes(text) ? (text as W) : expected(what, text));
}

/** Any text: names, keys, paths checked later by what opens them. */
export const anyText: Parser<string> = (text) => text;

export const nonEmptyText: Parser<string> = (text) => (text.trim() === '' ? expected('a non-empty value', text) : text);

/** `a,b,c`, each item parsed by `each`; `separator` may also be a pattern (`/[,:]/`). */
export function listOf<T>(each: Parser<T>, separator: string | RegExp = ','): Parser<T[]> {
  return (text) => {
    const parts = text.split(separator).map((s) => s.trim());
    if (parts.some((s) => s === '')) expected(`a ${separator === ',' ? 'comma-separated ' : ''}list`, text);
    return parts.map(each);
  };
}

/** A path to an existing file (read later by the command). */
export const existingFile: Parser<string> = (text) => {
  if (!statSync(text, { throwIfNoEntry: false })?.isFile()) throw new InvalidArgumentError(`file not found: ${text}`);
  return text;
};

/** A path to an existing directory. */
export const existingDir: Parser<string> = (text) => {
  if (!statSync(text, { throwIfNoEntry: false })?.isDirectory()) throw new InvalidArgumentError(`no such directory: ${text}`);
  return text;
};

/** An http(s) URL, as given ("expected <what>" otherwise). */
export function httpUrl(what = 'an http(s) URL'): Parser<string> {
  return (text) => {
    let protocol = '';
    try {
      protocol = new URL(text).protocol;
    } catch {
      protocol = '';
    }
    return protocol === 'http:' || protocol === 'https:' ? text : expected(what, text);
  };
}

/** `parse` from elsewhere, whose Error is a bad value: its message, less `strip`, becomes the parser's. */
export function reporting<T>(parse: (text: string) => T, strip?: RegExp): Parser<T> {
  return (text) => {
    try {
      return parse(text);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new InvalidArgumentError(strip === undefined ? message : message.replace(strip, ''));
    }
  };
}

// The single-message parsers `demo` and `gate` read, not yet through a table (their "expected a
// positive number" for any bad value, 'abc' included, is what their tests and users see).

export const positive = (v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !(n > 0) || !Number.isFinite(n)) throw new InvalidArgumentError(`expected a positive number, got '${v}'`);
  return n;
};

export const positiveInt = (v: string): number => {
  const n = positive(v);
  if (!Number.isInteger(n)) throw new InvalidArgumentError(`expected a positive integer, got '${v}'`);
  return n;
};
