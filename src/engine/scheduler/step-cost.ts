// The step-time budget: how many prompt tokens the next step may carry so that it takes about a
// target time, from a cost model fitted online to the steps the engine actually ran.
//
// Model: a forward pass of d decode rows and p prompt rows, whose rows attend over `own` cells of
// their own sequences in all, while the pool holds `kv` cells, costs
//
//     ms ≈ θ0 + θd·d + θp·p + θo·own/1000 + θk·(d + p)·kv/1000
//
// θd and θp are the per-row work (the matmuls; kept apart because a decode row also pays for its
// own sampling and, measured, a mixed batch costs more than its rows suggest). θo is attention
// proper: a row at position P attends over P cells of its own sequence. θk is the rest of the
// unified pool: llama.cpp walks every used cell for every row and skips the other sequences' by
// their mask — cheaper than a real cell but not free (a 256-token chunk at position 0 cost 68 ms
// alone and 91 ms beside 6,144 cells of another sequence; bench/native/chunk-cost.ts). One kv term
// for both, tried first, charged cached prefixes like context and starved prompts of chunk once
// the cache had filled the pool.
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
// Budget (decode-first): with d decode rows already in the step, the prompt chunk is the largest
// n whose addition to the step stays within the target, clamped to [minChunkTokens, maxChunkTokens − d]
// (and at most baseChunkTokens with the derived target). The chunk is charged for what it adds, not
// for the decode rows beside it: under load a step is its decode rows plus one target, and prompts
// are never squeezed out (charging the whole step, tried first, starved prefill to 64-token chunks at
// saturation: 0.23 requests/s completed where llama-server did 0.86). A step with no decode rows
// takes maxChunkTokens (nothing waits on it, so the most efficient chunk wins). The target is fixed
// (`targetMs`) or, by default, twice what a baseChunkTokens chunk adds at the start of a prompt: a
// chunk deep in a long prompt shrinks instead of costing 4.3x more than at position 0
// (results/per-token/chunk-cost.json).
//
// What a chunk adds is not read off the step model above. Sizing chunks closes a loop around it:
// the budget holds (rows × depth) near constant, so the fit cannot tell the attention term from the
// intercept, and on a real 6,000-token prompt it put 18 ms in θ0 and nothing in θo, then gave 5-row
// chunks that added 24 ms where 6 were asked for. ChunkCostModel measures the addition directly: a
// mixed step's time minus what a decode-only step with as many decode rows costs, fitted as
// c0 + n·(a + b·p̄) in the chunk's rows n and their mean position p̄ — the position moves through the
// whole prompt however the chunks are sized, so the slope stays identifiable. Steps under 64 rows
// and steps of 64 or more get separate fits: llama.cpp's CPU attention tiles 64 query rows at a
// time, and at position 5,888 a row cost 3.0–3.4 ms in a chunk of 4–32 rows against 2.3 ms in one
// of 64 (results/per-token/chunk-cost-small.json).

// Until `warmupSteps` steps have been observed the derived target is not trusted: the budget is
// baseChunkTokens, the static behaviour. A fixed target uses the chunk model from its first mixed
// step, and before that gives minChunkTokens.
import { bug } from '../../util/bug.ts';
import { solveRidge } from '../../util/linsolve.ts';

export interface StepCostOptions {
  /** Prompt tokens per step at the start of a prompt (the old static chunk; default target's basis). */
  readonly baseChunkTokens: number;
  /** Largest chunk (the step's token budget). */
  readonly maxChunkTokens: number;
  /** Smallest chunk the budget will give while a prompt waits (default 64: deep in a prompt a 32-row step cost 2.4 ms a row, a 64-row one 1.6). */
  readonly minChunkTokens?: number;
  /** Fixed step-time target in ms; undefined: predicted cost of baseChunkTokens at an empty pool. */
  readonly targetMs?: number;
  /** Observations before the model is used (default 8). */
  readonly warmupSteps?: number;
}

const DIM = 5;
/**
 * The derived target, as a multiple of what a base chunk costs at the start of a prompt. 1 held a
 * stream's ITL flat through a 6,000-token prefill but doubled that prompt's own prefill time (small
 * chunks deep in the pool are inefficient); 2 lets chunks stay whole until the step would double.
 */
export const AUTO_TARGET_FACTOR = 2;

/** Steps each bin remembers. */
const PER_BIN = 4;
/** Relative ridge (solveRidge): enough to keep a column nobody varied at ~0, small next to real data. */
const RIDGE = 1e-6;

/** What a step is made of, for its cost. */
export interface StepShape {
  readonly decodeRows: number;
  readonly promptRows: number;
  /** Σ over rows of the own-sequence cells each attends over (its position + 1). */
  readonly ownCells: number;
  /** Cells in use in the pool, this step's included. */
  readonly poolCells: number;
  /** Of ownCells, the prompt rows' share (Σ over prompt rows of their position + 1); absent: not known. */
  readonly promptCells?: number;
}

interface Observation {
  readonly x: readonly number[];
  readonly y: number;
}

interface Bin {
  readonly recent: Observation[];
  /** The median of the bin's first REF_STEPS steps: what this kind of step cost when first seen. */
  ref: number | null;
  readonly first: number[];
}

/** Steps of one kind that fix its reference time. */
const REF_STEPS = 4;
/** Steps over which the slowdown (median of measured / reference) is taken. */
const SLOWDOWN_WINDOW = 64;

/** Least squares over x = [1, d, p, own/1000, (d + p)·kv/1000], from the last PER_BIN steps of each kind. */
export class StepCostModel {
  readonly #bins = new Map<string, Bin>();
  /** measured / reference of the last SLOWDOWN_WINDOW steps whose kind had a reference. */
  readonly #ratios: number[] = [];
  readonly #xtx = new Float64Array(DIM * DIM);
  readonly #xty = new Float64Array(DIM);
  readonly #theta = new Float64Array(DIM);
  #n = 0;
  #nPrompt = 0;
  #dirty = false;
  #sinceRebuild = 0;

  /** Steps observed in all (not only those remembered). */
  get numObservations(): number {
    return this.#n;
  }

  /** Of those, steps that carried prompt rows (the only ones that teach θp). */
  get numPromptObservations(): number {
    return this.#nPrompt;
  }

  /**
   * How much slower steps run now than steps of the same kind (same bin: prompt rows, decode rows,
   * pool depth, context) did when first seen: the median of measured / reference over the last 64
   * such steps; null before 16. Like for like, so it needs no extrapolation; blind to a machine
   * that was already slow when the server started.
   */
  get slowdown(): number | null {
    return this.#ratios.length < 16 ? null : median(this.#ratios);
  }

  /** [θ0 ms, θd ms/decode row, θp ms/prompt row, θo ms/1000 own cells, θk ms/(row·1000 pool cells)]. */
  get theta(): readonly number[] {
    this.#solve();
    return Array.from(this.#theta);
  }

  static features(s: StepShape): number[] {
    return [1, s.decodeRows, s.promptRows, s.ownCells / 1000, ((s.decodeRows + s.promptRows) * s.poolCells) / 1000];
  }

  predict(shape: StepShape): number {
    this.#solve();
    const x = StepCostModel.features(shape);
    let y = 0;
    for (let i = 0; i < DIM; i++) y += this.#theta[i]! * x[i]!;
    return y;
  }

  observe(shape: StepShape, ms: number): void {
    const { decodeRows: d, promptRows: p } = shape;
    if (!(d >= 0 && p >= 0 && d + p > 0) || !(shape.ownCells >= 0) || !(shape.poolCells >= 0) || !Number.isFinite(ms) || ms < 0) return;
    const key = `${logBin(p)}:${logBin(d)}:${Math.floor(shape.poolCells / 1024)}:${logBin(shape.ownCells / Math.max(1, d + p))}`;
    let bin = this.#bins.get(key);
    if (bin === undefined) this.#bins.set(key, (bin = { recent: [], ref: null, first: [] }));
    const obs: Observation = { x: StepCostModel.features(shape), y: ms };
    bin.recent.push(obs);
    this.#accumulate(obs, 1);
    if (bin.recent.length > PER_BIN) this.#accumulate(bin.recent.shift()!, -1);
    if (bin.ref === null) {
      bin.first.push(ms);
      if (bin.first.length === REF_STEPS) bin.ref = median(bin.first);
    } else if (bin.ref > 0) {
      this.#ratios.push(ms / bin.ref);
      if (this.#ratios.length > SLOWDOWN_WINDOW) this.#ratios.shift();
    }
    this.#n++;
    if (p > 0) this.#nPrompt++;
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
    for (const bin of this.#bins.values()) for (const o of bin.recent) this.#accumulate(o, 1);
    this.#sinceRebuild = 0;
  }

  /**
   * Least squares with every cost term ≥ 0 (the intercept is free): solve, drop the most negative
   * term, solve again on the rest, until none is negative. At saturation the terms are nearly
   * collinear (prompt rows, their positions and the pool grow together) and the unconstrained fit
   * traded a negative per-row cost against a large attention one, which sized chunks from nonsense.
   */
  #solve(): void {
    if (!this.#dirty) return;
    this.#dirty = false;
    const active = Array.from({ length: DIM }, (_, i) => i);
    for (;;) {
      const k = active.length;
      const a = new Float64Array(k * k);
      const b = new Float64Array(k);
      active.forEach((fi, i) => {
        b[i] = this.#xty[fi]!;
        active.forEach((fj, j) => (a[i * k + j] = this.#xtx[fi * DIM + fj]!));
      });
      const out = new Float64Array(k);
      this.#theta.fill(0);
      if (!solveRidge(a, b, k, RIDGE, out, new Float64Array(k * k + k))) return;
      let worst = -1;
      active.forEach((fi, i) => {
        if (fi > 0 && out[i]! < 0 && (worst < 0 || out[i]! < out[worst]!)) worst = i;
      });
      if (worst < 0) {
        active.forEach((fi, i) => (this.#theta[fi] = out[i]!));
        return;
      }
      active.splice(worst, 1);
    }
  }
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** 0 for 0, else 1 + floor(log2 n): bins of doubling width. */
function logBin(n: number): number {
  return n <= 0 ? 0 : 1 + Math.floor(Math.log2(n));
}

/** Decode-only steps remembered per kind (decode rows on a log scale): their median is the baseline a chunk adds to. */
const BASE_STEPS = 8;
/** Mixed steps kept per band (512 cells of position × chunk size on a log scale), per line. */
const PER_BAND = 6;
/** Rows at and above which llama.cpp's CPU attention runs tiled (ggml's GGML_FA_TILE_Q). */
export const TILED_ROWS = 64;

/** Ridge of the chunk lines (relative): splits what steps of one size cannot tell apart, c0 from a. */
const LINE_RIDGE = 1e-3;

/**
 * ms an n-row chunk adds ≈ c0 + n·(a + b·p̄/1000), p̄ the rows' mean position: c0 the price of a
 * mixed step at all (one prompt row beside a decode row cost 2.3 ms more than the decode alone at
 * position 2,048, each further row 1.3), a and b a row's matmuls and attention. Non-negative least
 * squares over a memory banded by position and chunk size (the last few steps of each band).
 */
class ChunkLine {
  readonly #bands = new Map<string, { x: [number, number, number]; y: number }[]>();
  #n = 0;
  #cached: [number, number, number] | null | undefined;

  get size(): number {
    return this.#n;
  }

  add(n: number, meanPos: number, addMs: number): void {
    const key = `${Math.floor(meanPos / 512)}:${logBin(n)}`;
    let band = this.#bands.get(key);
    if (band === undefined) this.#bands.set(key, (band = []));
    band.push({ x: [1, n, (n * meanPos) / 1000], y: addMs });
    if (band.length > PER_BAND) band.shift();
    else this.#n++;
    this.#cached = undefined;
  }

  /** [c0, a, b], each ≥ 0; null with nothing seen or no cost a row. */
  fit(): [number, number, number] | null {
    if (this.#cached !== undefined) return this.#cached;
    const active = [0, 1, 2];
    let out: [number, number, number] | null = null;
    while (this.#n > 0 && active.length > 0) {
      const k = active.length;
      const a = new Float64Array(k * k);
      const b = new Float64Array(k);
      for (const band of this.#bands.values()) {
        for (const o of band) {
          active.forEach((fi, r) => {
            b[r]! += o.x[fi]! * o.y;
            active.forEach((fj, c) => (a[r * k + c]! += o.x[fi]! * o.x[fj]!));
          });
        }
      }
      const sol = new Float64Array(k);
      if (!solveRidge(a, b, k, LINE_RIDGE, sol, new Float64Array(k * k + k))) break;
      let worst = -1;
      sol.forEach((v, r) => {
        if (v < 0 && (worst < 0 || v < sol[worst]!)) worst = r;
      });
      if (worst < 0) {
        out = [0, 0, 0];
        active.forEach((fi, r) => (out![fi] = sol[r]!));
        // No cost a row: nothing to size a chunk by (two steps of one size, or noise).
        if (out[1] + out[2] <= 0) out = null;
        break;
      }
      active.splice(worst, 1);
    }
    this.#cached = out;
    return out;
  }
}

/**
 * What a prompt chunk adds to a step: the step's time minus a decode-only step's with as many decode
 * rows, one ChunkLine for steps under TILED_ROWS rows and one for steps at or above.
 */
export class ChunkCostModel {
  readonly #base = new Map<number, number[]>();
  readonly #lines: readonly [ChunkLine, ChunkLine] = [new ChunkLine(), new ChunkLine()];

  #largestChunk = 0;

  /** Mixed steps learnt from. */
  get size(): number {
    return this.#lines[0].size + this.#lines[1].size;
  }

  /** The most prompt rows a mixed step learnt from had: a fit is trusted to twice that, no further. */
  get largestChunk(): number {
    return this.#largestChunk;
  }

  /** The median decode-only step with this many decode rows (a prompt-only step's fixed part: that of one row); null before one is seen. */
  baseMs(decodeRows: number): number | null {
    const recent = this.#base.get(logBin(Math.max(1, decodeRows)));
    return recent === undefined ? null : median(recent);
  }

  observe(decodeRows: number, promptRows: number, promptCells: number, ms: number): void {
    if (!(decodeRows >= 0 && promptRows >= 0 && decodeRows + promptRows > 0 && Number.isFinite(ms) && ms >= 0)) return;
    if (promptRows === 0) {
      const key = logBin(decodeRows);
      let recent = this.#base.get(key);
      if (recent === undefined) this.#base.set(key, (recent = []));
      recent.push(ms);
      if (recent.length > BASE_STEPS) recent.shift();
      return;
    }
    const base = this.baseMs(decodeRows);
    if (base === null || !(promptCells > 0)) return;
    this.#lines[decodeRows + promptRows >= TILED_ROWS ? 1 : 0].add(promptRows, promptCells / promptRows, ms - base);
    this.#largestChunk = Math.max(this.#largestChunk, promptRows);
  }

  /** Predicted ms that n prompt rows from position chunkPos add to a step with decodeRows decode rows; null before a fit has a cost a row. */
  addMs(decodeRows: number, n: number, chunkPos: number): number | null {
    if (n <= 0) return 0;
    const tiled = decodeRows + n >= TILED_ROWS ? 1 : 0;
    // A kind not seen yet borrows the other's line (a small chunk priced as a tiled one is cheap by a third).
    const line = this.#lines[tiled].fit() ?? this.#lines[1 - tiled]!.fit();
    if (line === null) return null;
    // Every term ≥ 0 and some cost a row (ChunkLine.fit): what a chunk adds grows with n.
    return line[0] + n * (line[1] + (line[2] * (chunkPos + (n + 1) / 2)) / 1000);
  }

  /** [c0, a, b] of each line (ms a mixed step, ms a row, ms a row per 1000 cells of position); null where unseen. */
  lines(): { readonly small: readonly number[] | null; readonly tiled: readonly number[] | null } {
    return { small: this.#lines[0].fit(), tiled: this.#lines[1].fit() };
  }
}

export class StepBudget {
  readonly #opts: Required<Omit<StepCostOptions, 'targetMs'>> & { targetMs: number | undefined };
  /** The whole step's cost, for the slow-step warning and /stats. */
  readonly model: StepCostModel;
  /** What a chunk adds, for sizing chunks. */
  readonly chunks: ChunkCostModel;

  constructor(opts: StepCostOptions) {
    const minChunk = opts.minChunkTokens ?? 64;
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
    this.chunks = new ChunkCostModel();
  }

  /** Enough steps seen, prompt steps among them (mixed steps: what teaches a chunk's cost). */
  get warm(): boolean {
    return this.model.numObservations >= this.#opts.warmupSteps && this.chunks.size >= Math.min(4, this.#opts.warmupSteps);
  }

  /** The step-time target now (ms); null until the model is warm when it is derived. */
  targetMs(): number | null {
    if (this.#opts.targetMs !== undefined) return this.#opts.targetMs;
    if (!this.warm) return null;
    // What a base chunk adds to a step at the start of a prompt.
    const add = this.chunks.addMs(0, this.#opts.baseChunkTokens, 0);
    return add === null ? null : AUTO_TARGET_FACTOR * add;
  }

  /**
   * Most prompt tokens for a step that already carries `decodeRows` decode rows, the chunk starting
   * at position `chunkPos`. The chunk is sized by what it adds to the step, so decode rows never
   * squeeze prompts out: under load a step is its decode rows plus one target.
   *
   * `within.target` (default true): size by the step-time target. `within.stepCapMs`: a whole step's
   * cap (the tightest TPOT budget among the decode rows): the chunk adds at most the cap minus what
   * a decode-only step with these rows costs, down to one row a step.
   */
  prefillTokens(decodeRows: number, chunkPos: number, within: { readonly target?: boolean; readonly stepCapMs?: number | null } = {}): number {
    const { baseChunkTokens: base, maxChunkTokens: max } = this.#opts;
    if (decodeRows === 0) return Math.max(0, max);
    const useTarget = within.target ?? true;
    const cap = within.stepCapMs ?? null;
    const explicit = this.#opts.targetMs !== undefined;
    // With decode rows and the derived target, never above the base chunk: that target is the base
    // chunk's cost at the start of a prompt, so more could only come from extrapolating the fit.
    // Without a target (a cap alone) the base chunk stays the most: a cap only shrinks chunks.
    let room = Math.max(0, explicit && useTarget ? max - decodeRows : Math.min(base, max - decodeRows));
    let target = useTarget ? this.targetMs() : null;
    let min = this.#opts.minChunkTokens;
    if (cap !== null) {
      // A request's own budget is honoured down to one row; before a decode-only step with these
      // rows has been timed, what a chunk may add is unknown: one row.
      min = 1;
      const decodeOnly = this.chunks.baseMs(decodeRows);
      if (decodeOnly === null) return Math.min(1, room);
      const fromCap = Math.max(0, cap - decodeOnly);
      target = target === null ? fromCap : Math.min(target, fromCap);
    }
    if (target === null) return Math.min(base, room);
    const f = (n: number): number | null => this.chunks.addMs(decodeRows, n, chunkPos);
    // Nothing learnt yet (no fit with a cost a row): the static chunk, or the floor under a fixed
    // target or a cap (a base chunk could overshoot it many times).
    if (f(1) === null) return Math.min(explicit || cap !== null ? min : base, room);
    // Chunks grow at most two-fold past what the fit has seen (a fit of 1- and 2-row steps once
    // priced 2,047 rows at 1.4 ms); from 64 rows on, by at least 64: the scheduler trims a chunk by
    // up to 63 rows to align the step's rows, and less growth was trimmed away (63 rows, doubled to
    // 126, back to 63, for good).
    const seen = this.chunks.largestChunk;
    room = Math.min(room, Math.max(min, 2 * seen < TILED_ROWS ? 2 * seen : Math.max(2 * seen, seen + TILED_ROWS)));
    // The largest n in [lo, hi] that adds at most the target, or 0 (f increases within one kind of step).
    const largest = (lo: number, hi: number): number => {
      if (lo > hi || f(lo)! > target) return 0;
      if (f(hi)! <= target) return hi;
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (f(mid)! <= target) lo = mid;
        else hi = mid;
      }
      return lo;
    };
    // Under and over the tiled row count separately: crossing it makes rows cheaper.
    const edge = TILED_ROWS - decodeRows;
    const n = Math.max(largest(min, Math.min(room, edge - 1)), largest(Math.max(min, edge), room));
    return Math.min(n > 0 ? n : min, room);
  }

  /** A step of this shape took `ms`. */
  observe(shape: StepShape, ms: number): void {
    this.model.observe(shape, ms);
    if (shape.promptCells !== undefined) this.chunks.observe(shape.decodeRows, shape.promptRows, shape.promptCells, ms);
  }
}
