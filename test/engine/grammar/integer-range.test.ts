// Integer bounds as grammar: for random ranges (open or closed, negative, up to 16 digits), the
// grammar accepts exactly the canonical decimals inside (checked by the test GBNF interpreter's
// recognizer), never a leading zero or "-0", and the strings it generates lie inside.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { integerRange, MAX_DIGITS } from '../../../src/engine/grammar/integer-range.ts';
import { Gbnf, mulberry32 } from '../../helpers/gbnf.ts';

const LARGEST = 10n ** BigInt(MAX_DIGITS) - 1n;
const grammarOf = (lo: bigint | null, hi: bigint | null): Gbnf => new Gbnf(`root ::= ${integerRange(lo, hi)}`);
const inRange = (x: bigint, lo: bigint | null, hi: bigint | null): boolean => (lo === null || x >= lo) && (hi === null || x <= hi) && x >= -LARGEST && x <= LARGEST;

/** Bounds with structure (powers of ten, their neighbours, all-nines) as well as arbitrary values. */
const edgy = fc.oneof(
  fc.bigInt({ min: -LARGEST, max: LARGEST }),
  fc.bigInt({ min: -300n, max: 300n }),
  fc.tuple(fc.integer({ min: 0, max: MAX_DIGITS - 1 }), fc.constantFrom(-1n, 0n, 1n), fc.constantFrom(1n, -1n)).map(([e, d, sign]) => sign * (10n ** BigInt(e) + d)),
);
const bound = fc.option(edgy, { nil: null, freq: 4 });

test('property: exactly the integers in [lo, hi] match, in canonical form; generated ones lie inside', () => {
  fc.assert(
    fc.property(bound, bound, fc.array(edgy, { minLength: 5, maxLength: 10 }), fc.integer(), (a, b, probes, seed) => {
      const [lo, hi] = a !== null && b !== null && b < a ? [b, a] : [a, b];
      const g = grammarOf(lo, hi);
      const near = [lo, hi].flatMap((x) => (x === null ? [] : [x - 1n, x, x + 1n]));
      for (const x of [...probes, ...near, 0n, -1n, 1n]) {
        assert.equal(g.matches(String(x)), inRange(x, lo, hi), `${x} in [${lo}, ${hi}]`);
      }
      assert.ok(!g.matches('-0') && !g.matches('00') && !g.matches('01') && !g.matches('+1') && !g.matches(''));
      const random = mulberry32(seed);
      for (let i = 0; i < 10; i++) {
        const s = g.generate(random);
        assert.match(s, /^(0|-?[1-9][0-9]*)$/);
        assert.ok(inRange(BigInt(s), lo, hi), `${s} generated outside [${lo}, ${hi}]`);
      }
    }),
    { numRuns: 400, seed: 17 },
  );
});

test("zod's safe-integer bounds cost a grammar of a few hundred characters", () => {
  const rule = integerRange(-9007199254740991n, 9007199254740991n);
  assert.ok(rule.length < 2000, `${rule.length} characters`);
  const g = grammarOf(-9007199254740991n, 9007199254740991n);
  assert.ok(g.matches('9007199254740991') && !g.matches('9007199254740992') && g.matches('-42') && !g.matches('-9007199254740992'));
});
