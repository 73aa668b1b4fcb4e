// JSON Schema → GBNF (llama.cpp's grammar format), for response_format. The grammar accepts
// compact JSON that validates against the schema, for the subset below; anything else is refused
// with the keyword named, never silently loosened:
//
//   type (one or a list): object, array, string, number, integer, boolean, null
//   object: properties, required, additionalProperties (false, or absent with properties — only the
//           listed properties are generated; with no properties, any JSON object)
//   array: items, minItems, maxItems          string: enum, const, minLength, maxLength
//   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (any range: integer-range.ts)
//   number: minimum 0 or exclusiveMinimum 0   enum, const (any JSON value), anyOf, oneOf
//   $ref to #/$defs/<name> or #/definitions/<name> (recursion allowed)
//   annotations ignored: title, description, default, examples, $schema, $id, $comment, ...
//
// Properties come out in `properties` order. Whitespace is at most one space where JSON allows it,
// and numbers have bounded digits, so even a model with random weights reaches the end; strings
// without maxLength and arrays without maxItems are as long as the model makes them.
//
// Rules are named after where they come from (root-prop-name, def-Name); one rule per schema node,
// so the grammar is linear in the schema's size (a $ref is one rule however often it is used).
//
// Bounds, each checked while converting so that no schema costs more than a few ms of event-loop
// time (a request body of 1 MiB reaches here):
// - nesting: at most MAX_SCHEMA_DEPTH levels of subschemas (and of const/enum values), so the
//   recursion never nears the stack's limit;
// - counts (minLength, maxLength, minItems, maxItems): at most MAX_REPEAT_COUNT, inside what
//   llama.cpp's grammar parser expands (it refuses a repetition of 2,000);
// - size: the grammar's characters are counted as rules are named, and conversion stops as soon
//   as they pass `maxChars` (rule names grow with depth, so a deep chain is quadratic in size).

import { integerRange, MAX_DIGITS } from './integer-range.ts';

/** Why a schema cannot become a grammar: the keyword (or value) at fault, and where. */
export class UnsupportedSchemaError extends Error {
  constructor(
    readonly keyword: string,
    readonly path: string,
    message: string,
  ) {
    super(message);
    this.name = 'UnsupportedSchemaError';
  }
}

/** Deepest nesting of subschemas (items, properties, anyOf/oneOf, $ref targets) and of const/enum values. */
export const MAX_SCHEMA_DEPTH = 64;
/** Largest minLength, maxLength, minItems, maxItems. */
export const MAX_REPEAT_COUNT = 1000;
/** Default cap on a grammar's characters (the caller's `maxChars`). */
export const DEFAULT_MAX_GRAMMAR_CHARS = 64 * 1024;

/** Annotations that do not change which documents validate. */
const IGNORED = new Set(['title', 'description', 'default', 'examples', 'example', '$schema', '$id', '$comment', 'deprecated', 'readOnly', 'writeOnly', 'strict', '$defs', 'definitions']);
const SUPPORTED = new Set(['type', 'properties', 'required', 'additionalProperties', 'items', 'minItems', 'maxItems', 'enum', 'const', 'minLength', 'maxLength', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'anyOf', 'oneOf', '$ref']);

const PRIMITIVES = `ws ::= " "?
string ::= "\\"" char* "\\""
char ::= [^"\\\\\\x00-\\x1F\\x7F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})
bmp-char ::= [^"\\\\\\x00-\\x1F\\x7F\\U00010000-\\U0010FFFF] | "\\\\" (["\\\\/bfnrt] | "u" bmp-hex)
bmp-hex ::= [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}
integer ::= "-"? nonneg-integer
nonneg-integer ::= "0" | [1-9] [0-9]{0,15}
number ::= "-"? nonneg-number
nonneg-number ::= nonneg-integer ("." [0-9]{1,15})? exponent?
positive-number ::= ([1-9] [0-9]{0,15} ("." [0-9]{1,15})? | "0." "0"{0,14} [1-9] [0-9]{0,14}) exponent?
exponent ::= [eE] [-+]? [0-9]{1,2}
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (string ws ":" ws value (ws "," ws string ws ":" ws value)*)? ws "}"
array ::= "[" ws (value (ws "," ws value)*)? ws "]"`;

type Schema = Record<string, unknown>;

export interface GbnfOptions {
  /** Refuse (keyword '') once the grammar passes this many characters (default 64 KiB). */
  readonly maxChars?: number;
}

/** A GBNF grammar (root rule `root`) for `schema`; throws UnsupportedSchemaError. */
export function jsonSchemaToGbnf(schema: unknown, opts: GbnfOptions = {}): string {
  return new Converter(schema, opts.maxChars ?? DEFAULT_MAX_GRAMMAR_CHARS).grammar();
}

/** The grammar of any JSON object (response_format json_object). */
export function jsonObjectGbnf(): string {
  return `root ::= object\n${PRIMITIVES}\n`;
}

class Converter {
  readonly #root: unknown;
  readonly #rules = new Map<string, string>();
  /** $ref target → its rule name (set before the rule's body is built, so recursion terminates). */
  readonly #refs = new Map<string, string>();
  /** Rule body → the first rule with it. */
  readonly #byBody = new Map<string, string>();
  readonly #maxChars: number;
  /** Characters of the grammar so far: the primitives and every rule named. */
  #numChars = PRIMITIVES.length + 2;
  /** Subschemas being converted, from the root down. */
  #depth = 0;

  constructor(root: unknown, maxChars: number) {
    this.#root = root;
    this.#maxChars = maxChars;
  }

  grammar(): string {
    const root = this.#visit(this.#root, 'root', '#');
    if (root !== 'root') this.#set('root', root);
    const rootBody = this.#rules.get('root')!;
    this.#rules.delete('root');
    const lines = [`root ::= ${rootBody}`, ...[...this.#rules].map(([name, body]) => `${name} ::= ${body}`)];
    return `${lines.join('\n')}\n${PRIMITIVES}\n`;
  }

  /** A GBNF expression matching `s`, a subschema reached through `keyword` (a rule name, or a short inline expression). */
  #visit(s: unknown, name: string, path: string, keyword = 'schema'): string {
    if (this.#depth >= MAX_SCHEMA_DEPTH) throw new UnsupportedSchemaError(keyword, path, `The schema nests deeper than ${MAX_SCHEMA_DEPTH} levels (the most this server accepts)`);
    this.#depth++;
    try {
      return this.#node(s, name, path);
    } finally {
      this.#depth--;
    }
  }

  #node(s: unknown, name: string, path: string): string {
    if (s === true || (isObject(s) && Object.keys(s).every((k) => IGNORED.has(k)))) return 'value';
    if (!isObject(s)) throw new UnsupportedSchemaError('schema', path, `A schema must be an object or true; got ${describe(s)}`);
    for (const k of Object.keys(s)) {
      if (!IGNORED.has(k) && !SUPPORTED.has(k)) throw new UnsupportedSchemaError(k, path, `The JSON Schema keyword '${k}' is not supported`);
    }
    if (s.$ref !== undefined) return this.#ref(s.$ref, path);
    if (s.const !== undefined) return literal(this.#json(s.const, 'const', path));
    if (s.enum !== undefined) {
      if (!Array.isArray(s.enum) || s.enum.length === 0) throw new UnsupportedSchemaError('enum', path, "'enum' must be a non-empty array");
      return this.#rule(name, s.enum.map((v) => literal(this.#json(v, 'enum', path))).join(' | '));
    }
    const alternatives = s.anyOf ?? s.oneOf;
    if (alternatives !== undefined) {
      const kw = s.anyOf !== undefined ? 'anyOf' : 'oneOf';
      if (!Array.isArray(alternatives) || alternatives.length === 0) throw new UnsupportedSchemaError(kw, path, `'${kw}' must be a non-empty array`);
      if (s.type !== undefined) throw new UnsupportedSchemaError(kw, path, `'${kw}' beside 'type' is not supported`);
      return this.#rule(name, alternatives.map((a, i) => this.#visit(a, `${name}-${i}`, `${path}/${kw}/${i}`, kw)).join(' | '));
    }
    const type = s.type;
    if (Array.isArray(type)) {
      if (type.length === 0) throw new UnsupportedSchemaError('type', path, "'type' must not be an empty list");
      return this.#rule(name, type.map((t, i) => this.#typed(s, typeof t === 'string' ? t : describe(t), `${name}-${i}`, path)).join(' | '));
    }
    if (type === undefined) {
      if (s.properties !== undefined) return this.#typed(s, 'object', name, path);
      if (s.items !== undefined) return this.#typed(s, 'array', name, path);
      return 'value';
    }
    if (typeof type !== 'string') throw new UnsupportedSchemaError('type', path, "'type' must be a string or a list of strings");
    return this.#typed(s, type, name, path);
  }

  #typed(s: Schema, type: string, name: string, path: string): string {
    switch (type) {
      case 'object':
        return this.#object(s, name, path);
      case 'array':
        return this.#array(s, name, path);
      case 'string':
        return this.#string(s, name, path);
      case 'integer':
        return this.#integer(s, name, path);
      case 'number':
        return this.#number(s, path);
      case 'boolean':
      case 'null':
        return type;
      default:
        throw new UnsupportedSchemaError('type', path, `The 'type' '${type}' is not a JSON Schema type`);
    }
  }

  #object(s: Schema, name: string, path: string): string {
    const props = s.properties ?? {};
    if (!isObject(props)) throw new UnsupportedSchemaError('properties', path, "'properties' must be an object");
    const keys = Object.keys(props);
    const extra = s.additionalProperties;
    if (keys.length === 0 && extra !== false) {
      if (extra !== undefined && extra !== true) throw new UnsupportedSchemaError('additionalProperties', path, "'additionalProperties' with a schema is not supported");
      return 'object';
    }
    if (extra !== undefined && extra !== false) throw new UnsupportedSchemaError('additionalProperties', path, "'additionalProperties' other than false beside 'properties' is not supported");
    const required = s.required ?? [];
    if (!Array.isArray(required) || !required.every((r) => typeof r === 'string')) throw new UnsupportedSchemaError('required', path, "'required' must be a list of property names");
    // Sets: a schema of 50,000 properties, all required, must not cost 50,000² comparisons.
    const keySet = new Set(keys);
    const requiredSet = new Set(required);
    const unknown = required.find((r) => !keySet.has(r));
    if (unknown !== undefined) throw new UnsupportedSchemaError('required', path, `'required' names '${String(unknown)}', which is not in 'properties'`);
    if (keys.length === 0) return this.#rule(name, '"{" ws "}"');
    const kv = keys.map((k, i) => `${literal(JSON.stringify(k))} ws ":" ws ${this.#visit(props[k], `${name}-${ruleName(k)}-${i}`, `${path}/properties/${k}`, 'properties')}`);
    // after-i: properties i.. once one is written (each needs its comma); first-i: none written yet.
    // Either may match nothing when every property from i on is optional.
    const rest = (i: number): string => (i + 1 === keys.length ? '' : ` ${name}-after-${i + 1}`);
    for (let i = keys.length - 1; i >= 0; i--) {
      const isRequired = requiredSet.has(keys[i]!);
      if (i > 0) this.#set(`${name}-after-${i}`, isRequired ? `ws "," ws ${kv[i]}${rest(i)}` : `(ws "," ws ${kv[i]})?${rest(i)}`);
      const own = `${kv[i]}${rest(i)}`;
      this.#set(`${name}-first-${i}`, isRequired ? own : i + 1 === keys.length ? `(${own})?` : `${own} | ${name}-first-${i + 1}`);
    }
    return this.#rule(name, `"{" ws ${name}-first-0 ws "}"`);
  }

  #array(s: Schema, name: string, path: string): string {
    const item = s.items === undefined ? 'value' : this.#visit(s.items, `${name}-item`, `${path}/items`, 'items');
    const min = count(s.minItems, 'minItems', path) ?? 0;
    const max = count(s.maxItems, 'maxItems', path);
    if (max !== null && max < min) throw new UnsupportedSchemaError('maxItems', path, "'maxItems' is below 'minItems'");
    if (max === 0) return this.#rule(name, '"[" ws "]"');
    const more = `(ws "," ws ${item})${repeat(Math.max(min - 1, 0), max === null ? null : max - 1)}`;
    const list = `${item} ${more}`;
    return this.#rule(name, `"[" ws ${min === 0 ? `(${list})?` : list} ws "]"`);
  }

  #string(s: Schema, name: string, path: string): string {
    const min = count(s.minLength, 'minLength', path) ?? 0;
    const max = count(s.maxLength, 'maxLength', path);
    if (max !== null && max < min) throw new UnsupportedSchemaError('maxLength', path, "'maxLength' is below 'minLength'");
    if (min === 0 && max === null) return 'string';
    // Bounded: one grammar character is one UTF-16 unit and one code point (no astral characters,
    // no surrogate escapes), so JSON Schema's count (Ajv) and JavaScript's (zod's .max()) agree.
    return this.#rule(name, `"\\"" bmp-char${repeat(min, max)} "\\""`);
  }

  #integer(s: Schema, name: string, path: string): string {
    const lows = [bound(s, 'minimum', path, Math.ceil), bound(s, 'exclusiveMinimum', path, (x) => Math.floor(x) + 1)].filter((x) => x !== null);
    const highs = [bound(s, 'maximum', path, Math.floor), bound(s, 'exclusiveMaximum', path, (x) => Math.ceil(x) - 1)].filter((x) => x !== null);
    if (lows.length === 0 && highs.length === 0) return 'integer';
    // Bounds past the longest integer the grammar writes are no bound at all.
    const big = 10n ** BigInt(MAX_DIGITS) - 1n;
    const lo = lows.length === 0 ? null : lows.reduce((x, y) => (x > y ? x : y));
    const hi = highs.length === 0 ? null : highs.reduce((x, y) => (x < y ? x : y));
    if (lo !== null && hi !== null && hi < lo) throw new UnsupportedSchemaError('maximum', path, "'maximum' is below 'minimum': no integer fits");
    if (lo !== null && lo > big) throw new UnsupportedSchemaError('minimum', path, `'minimum' above ${MAX_DIGITS} digits is not supported`);
    if (hi !== null && hi < -big) throw new UnsupportedSchemaError('maximum', path, `'maximum' below -${MAX_DIGITS} digits is not supported`);
    return this.#rule(name, integerRange(lo !== null && lo >= -big ? lo : null, hi !== null && hi <= big ? hi : null));
  }

  #number(s: Schema, path: string): string {
    for (const k of ['maximum', 'exclusiveMaximum'] as const) {
      if (s[k] !== undefined) throw new UnsupportedSchemaError(k, path, `'${k}' on a number is not supported`);
    }
    if (s.minimum !== undefined && s.exclusiveMinimum !== undefined) throw new UnsupportedSchemaError('exclusiveMinimum', path, "'exclusiveMinimum' beside 'minimum' on a number is not supported");
    if (s.minimum === undefined && s.exclusiveMinimum === undefined) return 'number';
    if (s.minimum === 0) return 'nonneg-number';
    if (s.exclusiveMinimum === 0) return 'positive-number';
    const k = s.minimum !== undefined ? 'minimum' : 'exclusiveMinimum';
    throw new UnsupportedSchemaError(k, path, `'${k}' on a number is supported only as 0`);
  }

  #ref(ref: unknown, path: string): string {
    if (typeof ref !== 'string') throw new UnsupportedSchemaError('$ref', path, "'$ref' must be a string");
    const m = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
    if (m === null) throw new UnsupportedSchemaError('$ref', path, `'$ref' to '${ref}' is not supported (only #/$defs/<name> and #/definitions/<name>)`);
    const known = this.#refs.get(ref);
    if (known !== undefined) return known;
    const defs = isObject(this.#root) ? this.#root[m[1]!] : undefined;
    const target = isObject(defs) ? defs[m[2]!] : undefined;
    if (target === undefined) throw new UnsupportedSchemaError('$ref', path, `'$ref' to '${ref}' names no definition`);
    const name = `def-${ruleName(m[2]!)}-${this.#refs.size}`;
    this.#refs.set(ref, name);
    this.#rules.set(name, ''); // reserved: a reference inside the definition finds it
    const body = this.#visit(target, `${name}-body`, ref, '$ref');
    this.#set(name, body);
    return name;
  }

  /** Set rule `name` to `body`, counting its characters; past the cap the conversion stops here. */
  #set(name: string, body: string): void {
    this.#numChars += name.length + body.length + 5 - (this.#rules.get(name)?.length ?? 0);
    if (this.#numChars > this.#maxChars) throw new UnsupportedSchemaError('', '#', `The schema's grammar passes ${this.#maxChars} characters, the most this server accepts; simplify the schema (fewer or shallower subschemas, shorter property names)`);
    this.#rules.set(name, body);
  }

  /** `v` as JSON text, refused past the nesting limit (JSON.stringify recurses). */
  #json(v: unknown, keyword: string, path: string): string {
    if (depthOver(v, MAX_SCHEMA_DEPTH)) throw new UnsupportedSchemaError(keyword, path, `The '${keyword}' value nests deeper than ${MAX_SCHEMA_DEPTH} levels (the most this server accepts)`);
    const text = JSON.stringify(v);
    if (text.length > this.#maxChars) throw new UnsupportedSchemaError(keyword, path, `The '${keyword}' value passes ${this.#maxChars} characters, the most this server accepts`);
    return text;
  }

  /** Name `body` as a rule and return the name; a body already named (zod's same int() bounds on every field) is shared. */
  #rule(name: string, body: string): string {
    const known = this.#byBody.get(body);
    if (known !== undefined) return known;
    this.#byBody.set(body, name);
    this.#set(name, body);
    return name;
  }
}

/** An integer bound from `keyword` (a finite number, rounded inwards by `round`), or null when absent. */
function bound(s: Schema, keyword: string, path: string, round: (x: number) => number): bigint | null {
  const v = s[keyword];
  if (v === undefined) return null;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new UnsupportedSchemaError(keyword, path, `'${keyword}' must be a finite number`);
  return BigInt(round(v));
}

function isObject(v: unknown): v is Schema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function count(v: unknown, keyword: string, path: string): number | null {
  if (v === undefined) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_REPEAT_COUNT) throw new UnsupportedSchemaError(keyword, path, `'${keyword}' must be an integer in [0, ${MAX_REPEAT_COUNT}] (the grammar sampler expands each repetition)`);
  return v;
}

/** Whether `v` (parsed JSON) nests arrays and objects more than `limit` levels deep; iterative, O(size). */
function depthOver(v: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[v, 0]];
  while (stack.length > 0) {
    const [x, d] = stack.pop()!;
    if (typeof x !== 'object' || x === null) continue;
    if (d >= limit) return true;
    for (const c of Array.isArray(x) ? x : Object.values(x)) stack.push([c, d + 1]);
  }
  return false;
}

/** A short description of a value that is not what was expected (never the value itself: it may be huge or deep). */
function describe(v: unknown): string {
  if (Array.isArray(v)) return 'an array';
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  return typeof v === 'object' ? 'an object' : typeof v;
}

/** A GBNF repetition suffix for [min, max] occurrences (max null: unbounded). */
function repeat(min: number, max: number | null): string {
  if (max === null) return min === 0 ? '*' : min === 1 ? '+' : `{${min},}`;
  if (min === 0 && max === 1) return '?';
  return min === max ? `{${min}}` : `{${min},${max}}`;
}

/** A GBNF string literal for `text` (escapes for quotes, backslashes and control characters). */
export function literal(text: string): string {
  let out = '"';
  for (const ch of text) {
    const c = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

function ruleName(s: string): string {
  const r = s.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
  return r === '' ? 'p' : r.slice(0, 40);
}
