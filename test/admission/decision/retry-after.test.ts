import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { RetryAfter, type RetryWork } from '../../../src/admission/decision/retry-after.ts';

const SEED = 20261130;

const work = (w: Partial<RetryWork>): RetryWork => ({
  waitingPromptTokens: 0,
  runningPromptTokens: 0,
  remainingDecodeTokens: 0,
  prefillTokensPerS: 1000,
  decodeTokensPerS: 100,
  ...w,
});

describe('RetryAfter', () => {
  const r = new RetryAfter();

  it('is the work ahead at the measured rates, in whole seconds rounded up', () => {
    assert.equal(r.fromWork(work({ remainingDecodeTokens: 250 })), 3); // 2.5 s
    assert.equal(r.fromWork(work({ waitingPromptTokens: 3000, remainingDecodeTokens: 400 })), 7); // 3 + 4
  });

  it('floors at 1 s and caps at 60 s', () => {
    assert.equal(r.fromWork(work({})), 1);
    assert.equal(r.fromWork(work({ remainingDecodeTokens: 1 })), 1);
    assert.equal(r.fromWork(work({ remainingDecodeTokens: 1e9 })), 60);
  });

  it('a cold engine (no measured rate) with work queued gets the cap; with none, the floor', () => {
    assert.equal(r.fromWork(work({ remainingDecodeTokens: 10, decodeTokensPerS: null })), 60);
    assert.equal(r.fromWork(work({ decodeTokensPerS: null, prefillTokensPerS: null })), 1);
  });

  it('property: an integer in [min, max], monotone non-decreasing in each kind of queued work', () => {
    // Mostly rates and amounts that land between the floor and the cap, where a non-monotone rule would show.
    const rate = fc.oneof(
      { arbitrary: fc.constantFrom(null, 0), weight: 1 },
      { arbitrary: fc.integer({ min: 10, max: 1000 }), weight: 6 },
      { arbitrary: fc.double({ min: 0, max: 5000, noNaN: true }), weight: 1 },
    );
    const tokens = fc.oneof({ arbitrary: fc.integer({ min: 0, max: 3000 }), weight: 4 }, { arbitrary: fc.integer({ min: 0, max: 1e7 }), weight: 1 });
    let numBetween = 0;
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 100 }), tokens, tokens, tokens, tokens, rate, rate, (minS, extra, a, b, c, more, pre, dec) => {
        const ra = new RetryAfter({ minS, maxS: minS + extra });
        const base = work({ waitingPromptTokens: a, runningPromptTokens: b, remainingDecodeTokens: c, prefillTokensPerS: pre, decodeTokensPerS: dec });
        const s = ra.fromWork(base);
        assert.ok(Number.isInteger(s) && s >= minS && s <= minS + extra);
        if (s > minS && s < minS + extra) numBetween++;
        for (const bigger of [{ ...base, waitingPromptTokens: a + more }, { ...base, runningPromptTokens: b + more }, { ...base, remainingDecodeTokens: c + more }]) {
          assert.ok(ra.fromWork(bigger) >= s, `more work, earlier retry: ${JSON.stringify(bigger)}`);
        }
      }),
      { seed: SEED, numRuns: 2000 },
    );
    // A property that never lands between floor and cap passes for the wrong reason.
    assert.ok(numBetween >= 100, `only ${numBetween} runs between the floor and the cap`);
  });

  it('validates options; negative or NaN work is a bug', () => {
    assert.throws(() => new RetryAfter({ minS: 0 }), /expected minS to be an integer ≥ 1, got 0/);
    assert.throws(() => new RetryAfter({ minS: 5, maxS: 4 }), /expected maxS to be an integer ≥ minS \(5\), got 4/);
    assert.throws(() => r.fromWork(work({ remainingDecodeTokens: -1 })), /bug: retry-after given -1 queued tokens/);
    assert.throws(() => r.fromWorkS(NaN), /^BugError: bug: /);
  });
});
