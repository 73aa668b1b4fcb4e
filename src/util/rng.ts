// Seeded random numbers for the harness. Every random choice a run makes (arrival gaps, prompt
// lengths, output lengths, which shared prefix) comes from an Rng derived from the run's seed, so
// a run is replayable from its meta.json alone.
//
// Generator: sfc32 (a small, fast, statistically strong 128-bit-state generator) seeded through
// splitmix32. Independent streams are derived by hashing (seed, stream name), so changing the
// workload never changes the arrival realisation and vice versa.

/** A seeded source of uniforms and the few distributions the harness samples. */
export class Rng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(seed: number, stream = '') {
    if (!Number.isInteger(seed)) throw new Error(`Rng: expected an integer seed, got ${seed}`);
    let s = (seed ^ hashString(stream)) >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.#a = next();
    this.#b = next();
    this.#c = next();
    this.#d = next();
    for (let i = 0; i < 12; i++) this.#u32();
  }

  #u32(): number {
    const t = (((this.#a + this.#b) >>> 0) + this.#d) >>> 0;
    this.#d = (this.#d + 1) >>> 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) >>> 0;
    this.#c = ((this.#c << 21) | (this.#c >>> 11)) >>> 0;
    this.#c = (this.#c + t) >>> 0;
    return t;
  }

  /** Uniform on the open interval (0, 1) with 53 bits: never 0, so -log(u) is finite. */
  uniform(): number {
    const hi = this.#u32() >>> 5; // 27 bits
    const lo = this.#u32() >>> 6; // 26 bits
    return (hi * 67108864 + lo + 0.5) / 9007199254740992;
  }

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.uniform() * n);
  }

  /** Exp(rate): mean 1/rate. */
  exponential(rate: number): number {
    return -Math.log(this.uniform()) / rate;
  }

  /** Standard normal (Box–Muller; the second value is discarded to keep the stream simple). */
  normal(): number {
    return Math.sqrt(-2 * Math.log(this.uniform())) * Math.cos(2 * Math.PI * this.uniform());
  }

  /** Lognormal with log-mean mu and log-sd sigma. */
  lognormal(mu: number, sigma: number): number {
    return Math.exp(mu + sigma * this.normal());
  }

  /** Gamma(shape, scale) by Marsaglia–Tsang; shape < 1 uses the boost u^(1/shape). */
  gamma(shape: number, scale: number): number {
    if (shape < 1) return this.gamma(shape + 1, scale) * Math.pow(this.uniform(), 1 / shape);
    const d = shape - 1 / 3;
    const c = 1 / Math.sqrt(9 * d);
    for (;;) {
      let x: number;
      let v: number;
      do {
        x = this.normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const u = this.uniform();
      if (Math.log(u) < 0.5 * x * x + d - d * v + d * Math.log(v)) return d * v * scale;
    }
  }
}

function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}
