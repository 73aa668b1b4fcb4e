import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Hysteresis } from '../../../src/admission/decision/hysteresis.ts';
import { Rng } from '../../../src/util/rng.ts';

const BUDGET = 4000;

/** A bound that swings slowly ±15% around the budget (load rising and falling) with 2% noise on top (the 10% gap is 5 noise SDs). */
function noisyBounds(seed: number, n: number, period: number): number[] {
  const rng = new Rng(seed, 'bounds');
  return Array.from({ length: n }, (_, t) => BUDGET * (1 + 0.15 * Math.sin((2 * Math.PI * t) / period) + 0.02 * rng.normal()));
}

function replay(h: Hysteresis, bounds: readonly number[]): boolean[] {
  return bounds.map((b) => h.fits(b, BUDGET));
}

describe('Hysteresis', () => {
  it('is a two-threshold state machine: shed above the budget, resume only inside 0.9 of it', () => {
    const h = new Hysteresis();
    assert.equal(h.fits(3999, BUDGET), true);
    assert.equal(h.fits(4001, BUDGET), false);
    assert.equal(h.state, 'shedding');
    assert.equal(h.fits(3900, BUDGET), false); // inside the budget, not inside 0.9 of it
    assert.equal(h.fits(3600, BUDGET), true); // exactly 0.9 · budget
    assert.equal(h.state, 'admitting');
    assert.equal(h.fits(3900, BUDGET), true);
    assert.equal(h.numTransitions, 2);
  });

  it('stops chatter on a noisy bound series: two transitions per load cycle instead of dozens', () => {
    const bounds = noisyBounds(11, 4000, 500); // 8 cycles
    const plain = new Hysteresis({ resumeFactor: 1 });
    const damped = new Hysteresis();
    replay(plain, bounds);
    const dampedFits = replay(damped, bounds);
    console.log(`hysteresis: ${plain.numTransitions} transitions without, ${damped.numTransitions} with (8 cycles)`);
    assert.ok(damped.numTransitions <= 2 * 8 + 4, `damped: ${damped.numTransitions}`);
    assert.ok(plain.numTransitions >= 5 * damped.numTransitions, `plain ${plain.numTransitions} vs damped ${damped.numTransitions}`);
    // Still responsive: it sheds at every peak and admits at every trough.
    for (let c = 0; c < 8; c++) {
      assert.equal(dampedFits[c * 500 + 125], false, `cycle ${c} peak`);
      assert.equal(dampedFits[c * 500 + 375], true, `cycle ${c} trough`);
    }
  });

  it('validates its option and treats NaN as a bug', () => {
    assert.throws(() => new Hysteresis({ resumeFactor: 1.2 }), /expected resumeFactor in \(0, 1\], got 1.2/);
    assert.throws(() => new Hysteresis().fits(NaN, BUDGET), /^BugError: bug: /);
  });
});
