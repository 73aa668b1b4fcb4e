// The shape of each record line (format.ts), checked when a recording is read, so replay and the
// dashboard only ever see well-typed records: a file edited by hand, truncated oddly or written by
// something else is refused with the record type and field named (the reader adds file and line),
// never with a JavaScript error from deep inside replay. O(the line's size) per line.

import type { RecordLine } from './format.ts';

/** Largest token count a record may carry (prompt, output, cached): far past any context; replay makes arrays of it. */
const MAX_TOKENS = 1 << 24;

interface Check {
  readonly ok: (v: unknown) => boolean;
  /** What `ok` expects, for the message. */
  readonly what: string;
}

const check = (what: string, ok: (v: unknown) => boolean): Check => ({ what, ok });
const num = check('a finite number', (v) => typeof v === 'number' && Number.isFinite(v));
const numOrNull = check('a finite number or null', (v) => v === null || num.ok(v));
const index = check('a whole number ≥ 0', (v) => Number.isSafeInteger(v) && (v as number) >= 0);
const tokens = check(`a whole number from 0 to ${MAX_TOKENS}`, (v) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= MAX_TOKENS);
const str = check('a string', (v) => typeof v === 'string');
const strOrNull = check('a string or null', (v) => v === null || typeof v === 'string');
const bit = check('0 or 1', (v) => v === 0 || v === 1);
const object = check('an object', (v) => typeof v === 'object' && v !== null && !Array.isArray(v));
const oneOf = (values: readonly string[]): Check => check(`one of ${values.join(', ')}`, (v) => typeof v === 'string' && values.includes(v));
const finish = oneOf(['stop', 'length', 'abort', 'error']);
const list = (item: Check, what: string): Check => check(what, (v) => Array.isArray(v) && v.every((x) => item.ok(x)));
const tuple = (items: readonly Check[]): Check => check('', (v) => Array.isArray(v) && v.length === items.length && items.every((c, i) => c.ok(v[i])));
const optional = (c: Check): Check => check(`${c.what} (or absent)`, (v) => v === undefined || c.ok(v));

const FIELDS: { readonly [T in RecordLine['t']]: Readonly<Record<string, Check>> } = {
  header: { v: num, run: str, segment: index, startedAt: str, clockAtStartMs: num, version: str, meta: object },
  submit: { id: str, at: num, arr: num, slo: num, p: tokens, m: tokens, ie: bit, fork: strOrNull, b: list(str, 'a list of strings'), tl: str, tpot: optional(num) },
  step: {
    i: index,
    s: num,
    e: num,
    c: numOrNull,
    k: oneOf(['prefill', 'decode', 'mixed']),
    a: list(str, 'a list of request ids'),
    x: list(tuple([str, str]), 'a list of [request id, reason] pairs'),
    kv: index,
    r: list(tuple([str, tokens, index, bit]), 'a list of [request id, tokens, start position, 0|1] rows'),
    ok: check("1 or a failure reason", (v) => v === 1 || typeof v === 'string'),
    o: list(tuple([str, tokens, check('', (v) => v === null || finish.ok(v))]), 'a list of [request id, tokens, finish reason or null] outputs'),
  },
  decision: { id: str, at: num, admit: bit, bound: numOrNull, budget: num, why: str },
  done: { id: str, arr: num, dl: num, sch: numOrNull, ft: numOrNull, fin: numOrNull, p: tokens, m: tokens, cached: tokens, n: tokens, pre: index, o: finish },
  refused: { id: str, at: num, arr: num, dl: num, p: tokens, m: tokens, why: str },
  end: { at: num, dropped: index },
};

const ENTRIES = new Map(Object.entries(FIELDS).map(([t, fields]) => [t, Object.entries(fields)]));

/** Null when `line` (parsed JSON) is a well-formed record; else what is wrong with it. */
export function recordProblem(line: unknown): string | null {
  if (!object.ok(line)) return 'not a record (expected a JSON object)';
  const t = (line as Record<string, unknown>)['t'];
  const fields = typeof t === 'string' ? ENTRIES.get(t) : undefined;
  if (fields === undefined) return `unknown record type ${describe(t)}`;
  for (const [field, c] of fields) {
    const v = (line as Record<string, unknown>)[field];
    if (!c.ok(v)) return `a '${t as string}' record's '${field}' should be ${c.what}, got ${describe(v)}`;
  }
  return null;
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  const text = JSON.stringify(v);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}
