// The step-time budget: how many prompt tokens the next step may carry so that it takes about a
// target time, from a cost model fitted online to the steps the engine actually ran.
//
// Model: a forward pass of d decode rows and p prompt rows while the pool holds `kv` cells costs
//
//     ms ≈ θ0 + θd·d + θp·p + θa·(d + p)·kv/1000
//
// θd and θp are the per-row work (the matmuls; kept apart because a decode row also pays for its
// own sampling and, measured, a mixed batch costs more than its rows suggest), θa the attention:
// with llama.cpp's unified pool every row attends over the pool's used range, whoever's cells they
// are, so the per-token cost grows with what the pool holds, not only with the chunk's own position
// (bench/native/chunk-cost.ts).
//
// The fit is least squares over a stratified memory: steps are binned by their kind (prompt rows,
// decode rows, pool depth, each on a coarse log or 1,024-cell scale) and each bin keeps its last
// few steps. A new step replaces the oldest of its own bin only, so the model follows a machine
// that slows down wherever steps keep happening, while a long run of identical steps (decode only,
// same batch) cannot push out what the mixed steps taught it. Recursive least squares with
// forgetting, tried first, failed exactly there: through such a run the covariance of the
// unexcited directions grows without bound, and the next few different steps then fit their own
// noise exactly (a 2.5 ms decode step predicted at 31–62 ms after three ±10% steps; the test
// below). A small ridge keeps the fit defined before the steps vary enough to pin all four terms.
//
// Budget (decode-first): with d decode rows already in the step and the pool at kv cells, the
// prompt chunk is the largest n with predict(d, n, kv + n) ≤ target, clamped to
// [minChunkTokens, maxChunkTokens − d]. A step with no decode rows takes maxChunkTokens (nothing
// waits on it, so the most efficient chunk wins). The target is fixed (`targetMs`) or, by default,
// the predicted cost of a `baseChunkTokens` chunk into an empty pool: chunks keep the time the
// configured chunk has at the start of a prompt instead of growing with depth (issue: a 256-token
// chunk cost 10x more at position 7,200 than at 0).
//
// Until `warmupSteps` steps have been observed the model is not trusted: the budget is
// baseChunkTokens, the static behaviour.
import { bug } from '../../util/bug.ts';
import { solveRidge } from '../../admission/predictor/linsolve.ts';

export interface StepCostOptions {
  /** Prompt tokens per step at the start of a prompt (the old static chunk; default target's basis). */
  readonly baseChunkTokens: number;
  /** Largest chunk (the step's token budget). */
  readonly maxChunkTokens: number;
  /** Smallest chunk the budget will give while a prompt waits (progress before precision). */
  readonly minChunkTokens?: number;
  /** Fixed step-time target in ms; undefined: predicted cost of baseChunkTokens at an empty pool. */
  readonly targetMs?: number;
  /** Observations before the model is used (default 8). */
  readonly warmupSteps?: number;
}

const DIM = 4;
/** Steps each bin remembers. */
const PER_BIN = 4;
/** Relative ridge (solveRidge): enough to keep a column nobody varied at ~0, small next to real data. */
const RIDGE = 1e-6;

interface Observation {
  readonly x: readonly number[];
  readonly y: number;
}

/** Least squares over x = [1, d, p, (d + p)·kv/1000], from the last PER_BIN steps of each kind. */
export class StepCostModel {
  readonly #bins = new Map<string, Observation[]>();
  readonly #xtx = new Float64Array(DIM * DIM);
  readonly #xty = new Float64Array(DIM);
  readonly #theta = new Float64Array(DIM);
  readonly #scratch = new Float64Array(DIM * DIM + DIM);
  #n = 0;
  #dirty = false;
  #sinceRebuild = 0;

  /** Steps observed in all (not only those remembered). */
  get numObservations(): number {
    return this.#n;
  }

  /** [θ0 ms, θd ms/decode row, θp ms/prompt row, θa ms/(row·1000 cells)]. */
  get theta(): readonly number[] {
    this.#solve();
    return Array.from(this.#theta);
  }

  static features(decodeRows: number, promptRows: number, kv: number): [number, number, number, number] {
    return [1, decodeRows, promptRows, ((decodeRows + promptRows) * kv) / 1000];
  }

  predict(decodeRows: number, promptRows: number, kv: number): number {
    this.#solve();
    const x = StepCostModel.features(decodeRows, promptRows, kv);
    let y = 0;
    for (let i = 0; i < DIM; i++) y += this.#theta[i]! * x[i]!;
    return y;
  }

  observe(decodeRows: number, promptRows: number, kv: number, ms: number): void {
    if (!(decodeRows >= 0 && promptRows >= 0 && decodeRows + promptRows > 0) || !(kv >= 0) || !Number.isFinite(ms) || ms < 0) return;
    const key = `${logBin(promptRows)}:${logBin(decodeRows)}:${Math.floor(kv / 1024)}`;
    let bin = this.#bins.get(key);
    if (bin === undefined) this.#bins.set(key, (bin = []));
    const obs: Observation = { x: StepCostModel.features(decodeRows, promptRows, kv), y: ms };
    bin.push(obs);
    this.#accumulate(obs, 1);
    if (bin.length > PER_BIN) this.#accumulate(bin.shift()!, -1);
    this.#n++;
    this.#dirty = true;
    // Running sums drift by rounding as observations come and go: rebuild them now and then.
    if (++this.#sinceRebuild >= 4096) this.#rebuild();
  }

  #accumulate(o: Observation, sign: 1 | -1): void {
    for (let i = 0; i < DIM; i++) {
      this.#xty[i]! += sign * o.x[i]! * o.y;
      for (let j = 0; j < DIM; j++) this.#xtx[i * DIM + j]! += sign * o.x[i]! * o.x[j]!;
    }
  }

  #rebuild(): void {
    this.#xtx.fill(0);
    this.#xty.fill(0);
    for (const bin of this.#bins.values()) for (const o of bin) this.#accumulate(o, 1);
    this.#sinceRebuild = 0;
  }

  #solve(): void {
    if (!this.#dirty) return;
    this.#dirty = false;
    if (!solveRidge(this.#xtx, this.#xty, DIM, RIDGE, this.#theta, this.#scratch)) this.#theta.fill(0);
  }
}

/** 0 for 0, else 1 + floor(log2 n): bins of doubling width. */
function logBin(n: number): number {
  return n <= 0 ? 0 : 1 + Math.floor(Math.log2(n));
}

export class StepBudget {
  readonly #opts: Required<Omit<StepCostOptions, 'targetMs'>> & { targetMs: number | undefined };
  readonly model: StepCostModel;

  constructor(opts: StepCostOptions) {
    const minChunk = opts.minChunkTokens ?? 16;
    if (!(opts.baseChunkTokens >= 1 && opts.maxChunkTokens >= opts.baseChunkTokens && minChunk >= 1)) {
      bug(`StepBudget: expected 1 <= minChunk, baseChunk <= maxChunk; got ${minChunk}, ${opts.baseChunkTokens}, ${opts.maxChunkTokens}`);
    }
    this.#opts = {
      baseChunkTokens: opts.baseChunkTokens,
      maxChunkTokens: opts.maxChunkTokens,
      minChunkTokens: Math.min(minChunk, opts.baseChunkTokens),
      targetMs: opts.targetMs,
      warmupSteps: opts.warmupSteps ?? 8,
    };
    this.model = new StepCostModel();
  }

  get warm(): boolean {
    return this.model.numObservations >= this.#opts.warmupSteps;
  }

  /** The step-time target now (ms); null until the model is warm when it is derived. */
  targetMs(): number | null {
    if (this.#opts.targetMs !== undefined) return this.#opts.targetMs;
    if (!this.warm) return null;
    const c = this.#opts.baseChunkTokens;
    return this.model.predict(0, c, c);
  }

  /** Most prompt tokens for a step that already carries `decodeRows` decode rows, the pool holding `kvCells` before it. */
  prefillTokens(decodeRows: number, kvCells: number): number {
    const { baseChunkTokens: base, maxChunkTokens: max, minChunkTokens: min } = this.#opts;
    const room = Math.max(0, max - decodeRows);
    if (decodeRows === 0) return room;
    const target = this.targetMs();
    if (target === null || !this.warm) return Math.min(base, room);
    const [, , tp, ta] = this.model.theta as [number, number, number, number];
    // The largest n with predict(d, n, kv + n) ≤ target: increasing in n when θp > 0 and θa ≥ 0.
    const d = decodeRows;
    const f = (n: number): number => this.model.predict(d, n, kvCells + d + n);
    if (!(tp > 0) || ta < 0) return Math.min(base, room); // a fit that makes no physical sense: the static chunk
    if (f(min) > target) return Math.min(min, room);
    // f is increasing in n ≥ 0 here: bisect on integers.
    let lo = min;
    let hi = room;
    if (f(hi) <= target) return hi;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (f(mid) <= target) lo = mid;
      else hi = mid;
    }
    return Math.min(lo, room);
  }

  /** A step of `decodeRows` + `promptRows` rows took `ms` with the pool at `kvCells` cells, its own rows included. */
  observe(decodeRows: number, promptRows: number, kvCells: number, ms: number): void {
    this.model.observe(decodeRows, promptRows, kvCells, ms);
  }
}
