// Stop strings split across token boundaries never leak a partial match.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { StopMatcher } from '../../src/api/stop-matcher.ts';

/** Feed `pieces` through a matcher; return what a client would see and whether it stopped. */
function run(stops: string[], pieces: string[]): { out: string; stopped: boolean } {
  const m = new StopMatcher(stops);
  let out = '';
  for (const p of pieces) {
    const r = m.push(p);
    out += r.text;
    if (r.stopped) return { out, stopped: true };
  }
  return { out: out + m.flush(), stopped: false };
}

test('a stop string split over three pushes is held back, then dropped', () => {
  const m = new StopMatcher(['</end>']);
  assert.deepEqual(m.push('hello </'), { text: 'hello ', stopped: false });
  assert.deepEqual(m.push('en'), { text: '', stopped: false });
  assert.deepEqual(m.push('d> tail'), { text: '', stopped: true });
});

test('a false start is released once it can no longer match', () => {
  const m = new StopMatcher(['STOP']);
  assert.deepEqual(m.push('a ST'), { text: 'a ', stopped: false });
  assert.deepEqual(m.push('x'), { text: 'STx', stopped: false });
});

test('the earliest of several stop strings wins', () => {
  assert.deepEqual(run(['cd', 'b'], ['ab', 'cd']), { out: 'a', stopped: true });
});

test('property: for any text and any split, the client sees exactly the text before the first stop', () => {
  const alphabet = fc.constantFrom('a', 'b', 'c', '\n', 'é', '日');
  const str = (min: number, max: number) => fc.array(alphabet, { minLength: min, maxLength: max }).map((a) => a.join(''));
  fc.assert(
    fc.property(str(0, 60), fc.array(str(1, 4), { minLength: 1, maxLength: 3 }), fc.array(fc.nat(60), { maxLength: 20 }), (text, stops, cuts) => {
      const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((x, y) => x - y);
      const pieces: string[] = [];
      let prev = 0;
      for (const p of [...points, text.length]) {
        pieces.push(text.slice(prev, p));
        prev = p;
      }
      const firsts = stops.map((s) => text.indexOf(s)).filter((i) => i >= 0);
      const expected = firsts.length === 0 ? text : text.slice(0, Math.min(...firsts));
      const got = run(stops, pieces);
      assert.equal(got.out, expected);
      assert.equal(got.stopped, firsts.length > 0);
    }),
    { numRuns: 2000, seed: 20261130 },
  );
});
