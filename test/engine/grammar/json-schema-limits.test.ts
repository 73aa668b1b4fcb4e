// The converter's bounds: how deep a schema may nest, how many repetitions a count may ask for,
// and how large its grammar may grow. Each is a refusal naming what was exceeded, and each is
// checked while converting, so no schema costs more than a few ms of event-loop time: a schema
// whose grammar would pass the cap stops being converted as soon as it does (counted here in
// schema nodes read, not in time).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonSchemaToGbnf, MAX_REPEAT_COUNT, MAX_SCHEMA_DEPTH, UnsupportedSchemaError } from '../../../src/engine/grammar/json-schema-gbnf.ts';

/** `depth` levels of `anyOf: [...]` or `type: array, items: ...` around a string. */
function nested(kind: 'anyOf' | 'items', depth: number): unknown {
  let s: unknown = { type: 'string' };
  for (let i = 0; i < depth; i++) s = kind === 'anyOf' ? { anyOf: [s] } : { type: 'array', items: s };
  return s;
}

const refused = (schema: unknown, keyword: string, message: RegExp, opts?: { maxChars: number }): void => {
  assert.throws(
    () => jsonSchemaToGbnf(schema, opts),
    (e: unknown) => e instanceof UnsupportedSchemaError && e.keyword === keyword && message.test(e.message),
    `expected a refusal naming '${keyword}' and ${String(message)}`,
  );
};

test('a schema nested past the depth limit is refused naming the limit, however deep (no stack overflow)', () => {
  assert.equal(MAX_SCHEMA_DEPTH, 64);
  for (const depth of [MAX_SCHEMA_DEPTH + 1, 2000, 2900, 100_000]) {
    refused(nested('anyOf', depth), 'anyOf', /nests deeper than 64 levels/);
    refused(nested('items', depth), 'items', /nests deeper than 64 levels/);
  }
  // Through properties and $defs too.
  let obj: unknown = { type: 'string' };
  for (let i = 0; i < 2000; i++) obj = { type: 'object', properties: { a: obj } };
  refused(obj, 'properties', /nests deeper than 64 levels/);
  let def: unknown = { $ref: '#/$defs/d0' };
  const defs: Record<string, unknown> = {};
  for (let i = 0; i < 2000; i++) defs[`d${i}`] = { type: 'array', items: { $ref: `#/$defs/d${i + 1}` } };
  defs['d2000'] = { type: 'string' };
  def = { $defs: defs, ...(def as object) };
  refused(def, 'items', /nests deeper than 64 levels/);
  // At the limit it converts.
  assert.match(jsonSchemaToGbnf(nested('items', MAX_SCHEMA_DEPTH - 1)), /^root ::= /);
  assert.match(jsonSchemaToGbnf(nested('anyOf', MAX_SCHEMA_DEPTH - 1)), /^root ::= /);
});

test('const and enum values nested past the depth limit, and deep non-schemas, are refused (no stack overflow)', () => {
  const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`) as unknown;
  refused({ const: deep }, 'const', /nests deeper than 64 levels/);
  refused({ enum: [1, deep] }, 'enum', /nests deeper than 64 levels/);
  refused({ type: 'array', items: deep }, 'schema', /must be an object or true; got an array/);
  refused({ type: ['string', deep] }, 'type', /not a JSON Schema type/);
  // A shallow const is still fine.
  assert.match(jsonSchemaToGbnf({ const: [[1, { a: [2] }]] }), /\[\[1,\{\\"a\\":\[2\]\}\]\]/);
});

test('a count past the grammar sampler\'s repetition limit is refused naming the keyword and the limit', () => {
  assert.equal(MAX_REPEAT_COUNT, 1000);
  refused({ type: 'string', minLength: 10_000 }, 'minLength', /'minLength' must be an integer in \[0, 1000\]/);
  refused({ type: 'string', maxLength: 1001 }, 'maxLength', /\[0, 1000\]/);
  refused({ type: 'array', minItems: 5000 }, 'minItems', /\[0, 1000\]/);
  refused({ type: 'array', maxItems: 1e9 }, 'maxItems', /\[0, 1000\]/);
  assert.match(jsonSchemaToGbnf({ type: 'string', minLength: 1000, maxLength: 1000 }), /bmp-char\{1000\}/);
});

test('a grammar that passes the size cap is refused as soon as it does: the rest of the schema is never read', () => {
  // 20,000 alternatives, each its own rule of ~25 characters: about 2,600 fit in 64 KiB.
  const NUM = 20_000;
  const touched = new Set<number>();
  const alternatives = Array.from({ length: NUM }, (_, i) => {
    const alt = {};
    Object.defineProperty(alt, 'enum', { enumerable: true, get: () => (touched.add(i), [`value ${i}`]) });
    return alt;
  });
  refused({ anyOf: alternatives }, '', /grammar passes 65536 characters/);
  assert.ok(touched.size > 100 && touched.size < 5000, `read ${touched.size} of ${NUM} alternatives before refusing`);
  // The cap is the caller's: a smaller one stops sooner.
  touched.clear();
  refused({ anyOf: alternatives }, '', /grammar passes 4096 characters/, { maxChars: 4096 });
  assert.ok(touched.size < 200, `read ${touched.size} alternatives under a 4 KiB cap`);
  // Within the depth limit, long property names make names grow with depth: the cap stops it too.
  let s: unknown = { type: 'string' };
  for (let i = 0; i < MAX_SCHEMA_DEPTH - 1; i++) s = { type: 'object', properties: { ['p'.repeat(40)]: s }, required: ['p'.repeat(40)] };
  refused(s, '', /grammar passes 65536 characters/);
});

test('the 72 KB, 2,900-deep items schema is refused in a few ms', () => {
  const schema = nested('items', 2900);
  assert.ok(JSON.stringify(schema).length > 70_000);
  const t0 = performance.now();
  for (let i = 0; i < 20; i++) assert.throws(() => jsonSchemaToGbnf(schema), UnsupportedSchemaError);
  // 20 refusals; the old converter spent ~200 ms on one. Generous against a noisy machine.
  assert.ok(performance.now() - t0 < 500, `${Math.round(performance.now() - t0)} ms for 20 refusals`);
});
