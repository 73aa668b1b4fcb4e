// Random small JSON Schemas inside the subset src/engine/grammar supports (fast-check), for the
// converter's property test and the llama grammar tests. Kept small and bounded (short strings,
// few items, narrow integer ranges) so a model with random weights reaches the end of them.
import fc from 'fast-check';

type Schema = Record<string, unknown>;

const key = fc.constantFrom('a', 'b', 'name', 'x_1', 'é', 'q"uote', 'sp ace');
const jsonLeaf = fc.oneof(fc.boolean(), fc.constant(null), fc.integer({ min: -50, max: 50 }), fc.string({ maxLength: 4 }));

const leaf: fc.Arbitrary<Schema> = fc.oneof(
  fc.constant({ type: 'boolean' }),
  fc.constant({ type: 'null' }),
  fc.constant({ type: 'integer' }),
  fc.constant({ type: 'number' }),
  fc.constant({ type: 'number', minimum: 0 }),
  fc.constant({ type: 'integer', minimum: 0 }),
  fc.integer({ min: -20, max: 20 }).chain((lo) => fc.integer({ min: 0, max: 12 }).map((span) => ({ type: 'integer', minimum: lo, maximum: lo + span }))),
  fc.integer({ min: -1000, max: 1000 }).map((x) => ({ type: 'integer', exclusiveMaximum: x })),
  fc.constant({ type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 }),
  fc.constant({ type: 'number', exclusiveMinimum: 0 }),
  fc.integer({ min: 0, max: 6 }).chain((max) => fc.integer({ min: 0, max }).map((min) => ({ type: 'string', minLength: min, maxLength: max }))),
  fc.uniqueArray(jsonLeaf, { minLength: 1, maxLength: 4, selector: (v) => JSON.stringify(v) }).map((values) => ({ enum: values })),
  jsonLeaf.map((v) => ({ const: v })),
  fc.constant({ type: ['string', 'null'], maxLength: 3 }),
);

/** A random schema: leaves, objects (required subsets, additionalProperties false), arrays, anyOf. */
export function smallSchema(): fc.Arbitrary<Schema> {
  const { node } = fc.letrec<{ node: Schema }>((tie) => ({
    node: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leaf,
      fc.uniqueArray(fc.tuple(key, tie('node')), { minLength: 0, maxLength: 4, selector: ([k]) => k }).chain((props) =>
        fc.subarray(props.map(([k]) => k)).map((required) => ({ type: 'object', properties: Object.fromEntries(props), required, additionalProperties: false })),
      ),
      fc.tuple(tie('node'), fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 3 })).map(([items, min, extra]) => ({ type: 'array', items, minItems: min, maxItems: min + extra })),
      // anyOf only: the grammar does not make oneOf's options exclusive (docs/sampling.md).
      fc.array(tie('node'), { minLength: 1, maxLength: 3 }).map((options) => ({ anyOf: options })),
    ),
  }));
  return node;
}
