// The JSON Schema → GBNF converter: what it accepts, what it refuses (naming the keyword), and the
// property that matters — every string its grammar generates (by an independent GBNF interpreter,
// test/helpers/gbnf.ts) is JSON that validates against the schema (checked by Ajv, fastify's
// validator). llama.cpp's own parser must accept every grammar: test/api/sampling-llama.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Ajv } from 'ajv';
import { jsonObjectGbnf, jsonSchemaToGbnf, literal, UnsupportedSchemaError } from '../../../src/engine/grammar/json-schema-gbnf.ts';
import { Gbnf, mulberry32 } from '../../helpers/gbnf.ts';
import { smallSchema } from '../../helpers/schemas.ts';

const ajv = new Ajv({ strict: false });

/** `n` strings the grammar of `schema` generates, each parsed as JSON. */
function samples(schema: unknown, n: number, seed: number): unknown[] {
  const g = new Gbnf(jsonSchemaToGbnf(schema));
  const next = mulberry32(seed);
  return Array.from({ length: n }, () => {
    const text = g.generate(next);
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new Error(`generated text is not JSON: ${text}`);
    }
  });
}

function assertValid(schema: object, values: readonly unknown[]): void {
  for (const v of values) assert.ok(ajv.validate(schema, v), `${JSON.stringify(v)} fails ${JSON.stringify(schema)}: ${ajv.errorsText()}`);
}

test('an object with required and optional properties, enums, bounded integers and short strings', () => {
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 4 },
      color: { enum: ['red', 'green', 'blue'] },
      n: { type: 'integer', minimum: -3, maximum: 3 },
      ok: { type: 'boolean' },
      tags: { type: 'array', items: { type: 'string', maxLength: 2 }, minItems: 1, maxItems: 3 },
    },
    required: ['color', 'n', 'tags'],
    additionalProperties: false,
  };
  const values = samples(schema, 200, 1);
  assertValid(schema, values);
  // Optional properties are sometimes there and sometimes not; required ones always.
  const objs = values as Record<string, unknown>[];
  assert.ok(objs.some((o) => 'name' in o) && objs.some((o) => !('name' in o)));
  assert.ok(objs.every((o) => 'color' in o && 'n' in o && 'tags' in o));
  assert.deepEqual(new Set(objs.map((o) => o.n)), new Set([-3, -2, -1, 0, 1, 2, 3]));
});

test('every property optional, including the empty object', () => {
  const schema = { type: 'object', properties: { a: { type: 'null' }, b: { const: 7 }, c: { type: 'boolean' } }, additionalProperties: false };
  const values = samples(schema, 200, 2) as Record<string, unknown>[];
  assertValid(schema, values);
  assert.ok(values.some((v) => Object.keys(v).length === 0), 'the empty object is reachable');
  assert.ok(values.some((v) => Object.keys(v).length === 3), 'all three together are reachable');
});

test('anyOf, oneOf, type lists, $ref to $defs (recursive through an array) and definitions', () => {
  const schema = {
    $defs: { tree: { type: 'object', properties: { v: { type: 'integer', minimum: 0, maximum: 9 }, kids: { type: 'array', items: { $ref: '#/$defs/tree' }, maxItems: 2 } }, required: ['v', 'kids'], additionalProperties: false } },
    definitions: { leaf: { type: ['string', 'null'], maxLength: 3 } },
    type: 'object',
    properties: { t: { $ref: '#/$defs/tree' }, x: { anyOf: [{ type: 'number' }, { $ref: '#/definitions/leaf' }] }, y: { oneOf: [{ type: 'integer', minimum: 0 }, { type: 'boolean' }] } },
    required: ['t', 'x', 'y'],
  };
  assertValid(schema, samples(schema, 150, 3));
});

test("bounded strings count alike for JSON Schema (code points) and JavaScript (UTF-16 units, zod's max)", () => {
  const schema = { type: 'string', minLength: 1, maxLength: 2 };
  const values = samples(schema, 300, 9) as string[];
  assertValid(schema, values);
  for (const v of values) assert.ok(v.length >= 1 && v.length <= 2, `${JSON.stringify(v)} is ${v.length} UTF-16 units`);
  // Unbounded strings may hold astral characters (the interpreter's pool has one).
  assert.ok((samples({ type: 'string' }, 300, 9) as string[]).some((v) => /[\u{10000}-\u{10FFFF}]/u.test(v)));
});

test('json_object: any JSON object', () => {
  const g = new Gbnf(jsonObjectGbnf());
  const next = mulberry32(4);
  for (let i = 0; i < 100; i++) {
    const text = g.generate(next);
    const v = JSON.parse(text) as unknown;
    assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v), text);
  }
});

test('property: for random small schemas, every generated string parses and validates', () => {
  fc.assert(
    fc.property(smallSchema(), fc.integer({ min: 0, max: 1_000_000 }), (schema, seed) => {
      assertValid(schema, samples(schema, 8, seed));
    }),
    { numRuns: 300, seed: 42 },
  );
});

test('property: a JSON value the grammar accepts validates (soundness, from random values and mutated samples)', () => {
  let numAccepted = 0;
  fc.assert(
    fc.property(smallSchema(), fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 6 }), fc.integer({ min: 0, max: 1_000_000 }), (schema, randoms, seed) => {
      const g = new Gbnf(jsonSchemaToGbnf(schema));
      // Valid samples with one property or item dropped or swapped for null: near misses.
      const near = samples(schema, 3, seed).flatMap((v) => [v, nearMiss(v)]);
      for (const v of [...randoms, ...near]) {
        const text = JSON.stringify(v);
        if (text === undefined || text.length > 300 || !g.matches(text)) continue;
        numAccepted++;
        assert.ok(ajv.validate(schema, JSON.parse(text)), `the grammar accepts ${text}, which fails ${JSON.stringify(schema)}: ${ajv.errorsText()}`);
      }
    }),
    { numRuns: 150, seed: 43 },
  );
  assert.ok(numAccepted > 100, `only ${numAccepted} values were accepted: the property barely ran`);
});

function nearMiss(v: unknown): unknown {
  if (Array.isArray(v)) return v.length > 0 ? v.slice(1) : [null];
  if (typeof v === 'object' && v !== null) {
    const [k] = Object.keys(v);
    if (k === undefined) return { extra: 1 };
    const { [k]: _dropped, ...rest } = v as Record<string, unknown>;
    void _dropped;
    return rest;
  }
  return typeof v === 'number' ? v + 0.5 : null;
}

test('unsupported keywords and malformed values are refused, naming the keyword', () => {
  const cases: [unknown, string][] = [
    [{ type: 'string', pattern: 'a+' }, 'pattern'],
    [{ type: 'string', format: 'email' }, 'format'],
    [{ allOf: [{ type: 'string' }] }, 'allOf'],
    [{ type: 'object', properties: { a: { type: 'string' } }, additionalProperties: true }, 'additionalProperties'],
    [{ type: 'object', properties: { a: { not: {} } } }, 'not'],
    [{ type: 'array', prefixItems: [] }, 'prefixItems'],
    [{ type: 'integer', minimum: 5, maximum: 4 }, 'maximum'],
    [{ type: 'integer', exclusiveMinimum: 4, exclusiveMaximum: 5 }, 'maximum'],
    [{ type: 'integer', minimum: 1e20 }, 'minimum'],
    [{ type: 'integer', minimum: 'x' }, 'minimum'],
    [{ type: 'number', maximum: 1 }, 'maximum'],
    [{ type: 'number', minimum: 0.5 }, 'minimum'],
    [{ type: 'number', exclusiveMinimum: 1 }, 'exclusiveMinimum'],
    [{ type: 'date' }, 'type'],
    [{ $ref: 'http://example.com/s.json' }, '$ref'],
    [{ $ref: '#/$defs/missing' }, '$ref'],
    [{ type: 'object', properties: { a: {} }, required: ['b'] }, 'required'],
    [{ type: 'string', minLength: 3, maxLength: 2 }, 'maxLength'],
    [{ enum: [] }, 'enum'],
    ['string', 'schema'],
  ];
  for (const [schema, keyword] of cases) {
    assert.throws(
      () => jsonSchemaToGbnf(schema),
      (e: unknown) => e instanceof UnsupportedSchemaError && e.keyword === keyword && e.message.includes(keyword === 'schema' ? 'schema' : `'${keyword}'`),
      `${JSON.stringify(schema)} should be refused naming ${keyword}`,
    );
  }
});

test("zod's JSON Schema (safe-integer bounds, positive numbers, 2020-12 $schema) converts and validates", () => {
  const schema = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: {
      a: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
      b: { type: 'number', exclusiveMinimum: 0 },
      c: { type: 'integer', minimum: 0, maximum: 9007199254740991 },
      h: { type: 'integer', minimum: -9007199254740991, maximum: 100 },
      e: { minItems: 1, type: 'array', items: { type: 'string', maxLength: 3 }, maxItems: 2 },
    },
    required: ['a', 'b', 'c', 'h', 'e'],
    additionalProperties: false,
  };
  const { $schema, ...forAjv } = schema; // Ajv's default meta-schema is draft-07
  void $schema;
  assertValid(forAjv, samples(schema, 100, 8));
  // Fields with the same bounds share one rule: 40 of zod's int() cost one range, not 40.
  const int = { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 };
  const many = jsonSchemaToGbnf({ type: 'object', properties: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`f${i}`, int])) });
  assert.equal(many.split('\n').filter((l) => l.includes('[1-9] [0-9]{2}')).length, 1);
});

test('annotations are ignored; an empty schema or true means any JSON value', () => {
  const schema = { $schema: 'http://json-schema.org/draft-07/schema#', title: 'T', description: 'd', type: 'object', properties: { a: { type: 'boolean', description: 'x', default: true } }, required: ['a'], additionalProperties: false };
  assertValid(schema, samples(schema, 20, 5));
  assert.match(jsonSchemaToGbnf({}), /^root ::= value$/m);
  assert.match(jsonSchemaToGbnf(true), /^root ::= value$/m);
});

test('literals escape quotes, backslashes and control characters; odd property names survive', () => {
  assert.equal(literal('a"b\\c\n'), '"a\\"b\\\\c\\x0a"');
  const schema = { type: 'object', properties: { 'we"ird\\ key': { const: 'ü\n"' }, '': { type: 'null' } }, required: ['we"ird\\ key', ''], additionalProperties: false };
  const values = samples(schema, 5, 6);
  assertValid(schema, values);
  assert.deepEqual(values[0], { 'we"ird\\ key': 'ü\n"', '': null });
});
