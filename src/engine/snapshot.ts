// The engine's state as the admission controller reads it: a frozen record of scalars, rebuilt
// lazily after every step and every arrival, never a live object. "Work ahead of a deadline" is
// answered from one sorted array (binary search); the running averages are exponentially
// weighted over steps.
//
// Cost: building is O(held requests · log) (a sort of the waiting set by deadline); it happens at
// most once per step or arrival, and only when someone reads it.

import type { SchedulerSnapshot } from './scheduler/scheduler.ts';

export interface EngineSnapshot {
  /** Steps run so far and the engine time the snapshot describes, ms. */
  readonly numSteps: number;
  readonly atMs: number;
  readonly numWaiting: number;
  readonly numRunning: number;
  readonly numFreeSeqIds: number;
  readonly maxSequences: number;
  readonly numBlocks: number;
  readonly numFreeBlocks: number;
  readonly blockSize: number;
  /** Tokens waiting requests must compute before their first (next) sample. */
  readonly waitingPromptTokens: number;
  /** Prompt tokens running requests have still to compute. */
  readonly runningPromptTokens: number;
  /** Output tokens running requests may still generate (max_tokens less what they have): an upper bound. */
  readonly remainingDecodeTokens: number;
  /** Deadlines of held requests that still have prompt work, ascending, with the running sum of that work. */
  readonly promptWorkByDeadline: readonly { readonly deadlineMs: number; readonly cumulativeTokens: number }[];
  /** Exponentially weighted step time, ms, and token rates, tokens/s (null before the first such step). */
  readonly avgStepMs: number | null;
  /**
   * Step time averaged over about a long request's decode (α = 1/256 per step), ms: what a request
   * admitted now will see per token if load stays as it has been, where avgStepMs (about 5 steps)
   * says only what the last few steps took — on an engine shedding a 4× overload, a request that
   * arrived in a lull measured 1.5–2 ms there and then decoded at 2–4× that.
   */
  readonly longStepMs: number | null;
  readonly prefillTokensPerS: number | null;
  readonly decodeTokensPerS: number | null;
  /**
   * The 90th percentile of how long outputs run before they end on their own (EOS or a stop), in
   * tokens, over recently finished requests — a Kaplan–Meier estimate, since a request that hit its
   * max_tokens only says its output would have run at least that long (OutputLengths). Null until
   * 20 have finished and the estimate reaches the 90th percentile: where every request runs to its
   * cap (ignore_eos), never. Learned from requests that are over, never from the one being decided;
   * `min(max_tokens, this)` is a length the throughput arithmetic can plan with.
   */
  readonly outputTokensP90: number | null;
  /**
   * Step time by how many sequences the step decoded, ms (StepTimesByBatch.table): index b − 1 is what
   * a step with b decoding sequences takes, prefill chunks sharing the step included — the time per
   * token a request decoding beside b − 1 others sees. Null before any decode step; absent where no
   * engine measures it (a gateway's scraped view).
   */
  readonly stepMsByBatch?: Float64Array | null;
  /**
   * How many sequences the engine has been decoding lately: the decode batch averaged over wall time
   * with a 2 s time constant (RecentBatch), idle time counting as 0. A request admitted in a lull of
   * a shed overload decodes beside the requests admitted after it, not in the lull's small batch;
   * an engine idle for a few seconds is back near 0. Absent where no engine measures it.
   */
  readonly recentDecodeBatch?: number;
  /**
   * The running requests' deadlines and how much longer each will decode, as pairs: entry 2i is
   * request i's deadline (engine time, ms), entry 2i + 1 the output tokens it will still generate
   * by the 90th percentile of outputs that ran as long as it has (OutputLengths.remaining), at most
   * what its max_tokens leaves — all of that when too few outputs have ended to tell. What admission
   * reads to keep a new request from pushing an admitted one past its deadline
   * (admission/decision/protect.ts). Absent where no engine holds the requests (a gateway).
   */
  readonly runningDeadlines?: Float64Array;
  /** The scheduler's own view (KV, preemptions, why it stopped taking waiting requests). */
  readonly scheduler: SchedulerSnapshot;
}

/** Prompt tokens held requests with a deadline at or before `deadlineMs` have still to compute (EDF serves them first). */
export function promptTokensAhead(s: EngineSnapshot, deadlineMs: number): number {
  const a = s.promptWorkByDeadline;
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]!.deadlineMs <= deadlineMs) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? 0 : a[lo - 1]!.cumulativeTokens;
}

/** An exponentially weighted mean; null until the first sample. */
export class Ewma {
  readonly #alpha: number;
  #value: number | null = null;

  constructor(alpha: number) {
    if (!(alpha > 0 && alpha <= 1)) throw new Error(`Ewma: expected alpha in (0, 1], got ${alpha}`);
    this.#alpha = alpha;
  }

  get value(): number | null {
    return this.#value;
  }

  add(x: number): void {
    this.#value = this.#value === null ? x : this.#value + this.#alpha * (x - this.#value);
  }
}

/** OutputLengths' samples as saved across a restart. */
export interface SavedOutputLengths {
  readonly lengths: readonly number[];
  readonly ended: readonly boolean[];
}

/**
 * How long outputs run before they end on their own, from the last `capacity` finished requests:
 * each is an output length and whether it ended there (EOS or a stop: an event) or was cut at its
 * max_tokens (right-censored: it would have run at least that long). `value` is the Kaplan–Meier
 * estimate's `q`-quantile — the least length at which the estimated share of outputs still running
 * is at most 1 − q — or null with fewer than `minSamples` requests or when the estimate never gets
 * there (too many cut at their cap to tell). So a max_tokens of 1 (a probe) says almost nothing, and
 * a workload that runs every request to its cap never gets a length below the cap. add is O(1);
 * value and remaining sort a copy of the ring only after a change.
 */
export class OutputLengths {
  readonly #lengths: Float64Array;
  readonly #ended: Uint8Array;
  readonly #q: number;
  readonly #minSamples: number;
  #next = 0;
  #size = 0;
  #curve: { readonly times: Float64Array; readonly surviving: Float64Array; readonly quantile: number | null } | null = null;
  #stale = false;

  constructor(o: { readonly capacity?: number; readonly q?: number; readonly minSamples?: number } = {}) {
    const { capacity = 256, q = 0.9, minSamples = 20 } = o;
    if (!(capacity >= minSamples && minSamples >= 1)) throw new Error(`OutputLengths: expected capacity ≥ minSamples ≥ 1, got ${capacity}, ${minSamples}`);
    if (!(q > 0 && q < 1)) throw new Error(`OutputLengths: expected q in (0, 1), got ${q}`);
    this.#lengths = new Float64Array(capacity);
    this.#ended = new Uint8Array(capacity);
    this.#q = q;
    this.#minSamples = minSamples;
  }

  /** One finished request: `tokens` of output, and whether it ended on its own (false: cut at its cap). */
  add(tokens: number, endedOnItsOwn: boolean): void {
    this.#lengths[this.#next] = tokens;
    this.#ended[this.#next] = endedOnItsOwn ? 1 : 0;
    this.#next = (this.#next + 1) % this.#lengths.length;
    this.#size = Math.min(this.#size + 1, this.#lengths.length);
    this.#stale = true;
  }

  /** The samples, oldest first (what restore takes back). */
  save(): SavedOutputLengths {
    const lengths: number[] = [];
    const ended: boolean[] = [];
    const start = this.#size === this.#lengths.length ? this.#next : 0;
    for (let i = 0; i < this.#size; i++) {
      const j = (start + i) % this.#lengths.length;
      lengths.push(this.#lengths[j]!);
      ended.push(this.#ended[j] === 1);
    }
    return { lengths, ended };
  }

  /** Adds saved samples, oldest first (the newest `capacity` stay); throws, adding none, when `data` is not what save() returns. Returns the number added. */
  restore(data: unknown): number {
    const d = data as Partial<SavedOutputLengths> | null;
    const { lengths, ended } = d ?? {};
    if (!Array.isArray(lengths) || !Array.isArray(ended) || lengths.length !== ended.length) throw new Error('expected { lengths, ended } of equal length');
    if (!lengths.every((n) => Number.isSafeInteger(n) && n >= 0) || !ended.every((e) => typeof e === 'boolean')) throw new Error('expected lengths ≥ 0 and booleans');
    lengths.forEach((n: number, i) => this.add(n, ended[i] as boolean));
    return lengths.length;
  }

  get value(): number | null {
    if (this.#size < this.#minSamples) return null;
    return this.#estimate().quantile;
  }

  /**
   * How many more tokens an output that has run `generated` tokens without ending will run, at the
   * `q`-quantile given that it got there: the least t at which the Kaplan–Meier survival falls to
   * (1 − q) times its value at `generated`, less `generated`. Null with fewer than `minSamples`
   * requests, or when the estimate never falls that far past `generated` (the caller's fallback is
   * the request's own cap). A geometric length's answer does not shrink as the output grows; one
   * that runs to a common cap shrinks to what is left of it. O(log n) after a change.
   */
  remaining(generated: number): number | null {
    if (this.#size < this.#minSamples) return null;
    const { times, surviving } = this.#estimate();
    // Survival just after `generated`: the last event time at or below it.
    let lo = 0;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (times[mid]! <= generated) lo = mid + 1;
      else hi = mid;
    }
    const atG = lo === 0 ? 1 : surviving[lo - 1]!;
    if (!(atG > 0)) return null;
    const target = (1 - this.#q) * atG + 1e-12;
    for (let k = lo; k < times.length; k++) if (surviving[k]! <= target) return times[k]! - generated;
    return null;
  }

  /** The Kaplan–Meier curve (event times ascending, survival just after each) and its q-quantile, cached until the next add. */
  #estimate(): { readonly times: Float64Array; readonly surviving: Float64Array; readonly quantile: number | null } {
    if (this.#curve === null || this.#stale) {
      this.#curve = this.#kaplanMeier();
      this.#stale = false;
    }
    return this.#curve;
  }

  #kaplanMeier(): { readonly times: Float64Array; readonly surviving: Float64Array; readonly quantile: number | null } {
    const order = Array.from({ length: this.#size }, (_, i) => i).sort((a, b) => this.#lengths[a]! - this.#lengths[b]! || this.#ended[b]! - this.#ended[a]!);
    const times: number[] = [];
    const surv: number[] = [];
    let quantile: number | null = null;
    let atRisk = this.#size;
    let surviving = 1;
    for (let k = 0; k < order.length; ) {
      const t = this.#lengths[order[k]!]!;
      let events = 0;
      let leaving = 0;
      for (; k < order.length && this.#lengths[order[k]!]! === t; k++, leaving++) events += this.#ended[order[k]!]!;
      if (events > 0) {
        surviving *= 1 - events / atRisk;
        times.push(t);
        surv.push(surviving);
        if (quantile === null && surviving <= 1 - this.#q + 1e-12) quantile = t;
      }
      atRisk -= leaving;
    }
    return { times: Float64Array.from(times), surviving: Float64Array.from(surv), quantile };
  }
}

/** StepTimesByBatch's means as saved across a restart. */
export interface SavedStepTimes {
  readonly mean: readonly (number | null)[];
  readonly count: readonly number[];
}

/**
 * Step time as a function of the decode batch: a mean per batch size b (steps that decoded b
 * sequences, whatever prefill shared them; equal weights for the first 1/α steps, then exponential), so the step time a request will
 * see can be read for the batch it joins rather than for the load of the last steps. A long average
 * over all steps remembers an overload through the idle time after it (an idle engine runs no steps
 * to update it), and that held the cold-start arithmetic over the budget for 50-110 s on an idle
 * engine after a shed overload (results/admission/natural-default-5min).
 *
 * `table()` is monotone in b, since a larger batch does not decode faster: entry b is the largest
 * measured mean at or below b; below the smallest measured batch, that batch's mean; an unmeasured
 * size above a measured one, the nearest measured size's mean grown by how the warm-up's plain
 * decode steps grew with the batch (seed), or without that held between measured sizes and scaled
 * by b / b_max past the largest (decode cost at most linear in the batch: an upper bound where
 * nothing was measured). A size with fewer than 1/α steps reads no slower than the nearest size
 * below it that has them, grown the same way (linearly without a shape): a few steps that shared
 * long prompt chunks are not yet that size's step time. Admission plans a request by the batch it
 * joins, and a size read too slow is refused, so never run, so never corrected — on chat-natural
 * at a 10 s SLO, 24 ms at batch 2 beside 6.9 ms at batch 1 refused every request that arrived beside
 * one running request for five minutes (38% of a half-saturation load that admission off served,
 * results/admission/chat-natural-slow-host); read too fast, the requests admitted on it measure the
 * size within 1/α steps. add is O(1); table is O(maxBatch) after a change.
 */
export class StepTimesByBatch {
  readonly #mean: Float64Array;
  /** Steps seen per batch size: the first 1/α are averaged with equal weights. */
  readonly #count: Float64Array;
  readonly #alpha: number;
  /** Steps after which a size's mean stands on its own (1/α: where the mean turns exponential). */
  readonly #settleSteps: number;
  /** Growth with the batch from the warm-up's timed steps (seed), monotone; null: linear. */
  #shape: Float64Array | null = null;
  #table: Float64Array | null = null;
  #stale = false;

  constructor(maxBatch: number, alpha = 1 / 32) {
    if (!(Number.isSafeInteger(maxBatch) && maxBatch >= 1)) throw new Error(`StepTimesByBatch: expected maxBatch ≥ 1, got ${maxBatch}`);
    if (!(alpha > 0 && alpha <= 1)) throw new Error(`StepTimesByBatch: expected alpha in (0, 1], got ${alpha}`);
    this.#mean = new Float64Array(maxBatch).fill(NaN);
    this.#count = new Float64Array(maxBatch);
    this.#alpha = alpha;
    this.#settleSteps = Math.ceil(1 / alpha);
  }

  /** One step that decoded `batch` sequences and took `ms`; steps that decoded none are not counted. */
  add(batch: number, ms: number): void {
    if (!(batch >= 1) || !(ms >= 0) || !Number.isFinite(ms)) return;
    const i = Math.min(batch, this.#mean.length) - 1;
    const m = this.#mean[i]!;
    // Weight max(1/n, α): a plain mean until 1/α steps, so the first step at a batch size (often a
    // long prefill chunk sharing it) does not stand for that size for the next hundred steps.
    const n = ++this.#count[i]!;
    this.#mean[i] = Number.isNaN(m) ? ms : m + Math.max(1 / n, this.#alpha) * (ms - m);
    this.#stale = true;
  }

  /**
   * How step time grows with the batch, from timed plain decode steps at some sizes (the warm-up's):
   * a size between two timed ones on the straight line between them, one below the smallest at the
   * smallest's, one above the largest scaled by b / b_max. table() reads a size no real step has
   * measured as the nearest measured size below it scaled by this growth, instead of by b / b_max;
   * before any real step the table is this. Its level is not trusted, only its shape: real steps
   * carry the prefill chunks that share them (on long prompts with the tiny model the batch-1 mean
   * was 12.9 ms where a plain decode step took 3.7 ms, two sequences 6.5 ms, sixteen 20 ms).
   * Without it a size the engine had not run read as linear in the batch from the largest run, an
   * upper bound loose past small sizes (batch 16 at 206 ms there). Not saved across a restart:
   * every start times it again.
   */
  seed(measured: ReadonlyArray<readonly [batch: number, ms: number]>): void {
    const points = measured.filter(([b, ms]) => Number.isSafeInteger(b) && b >= 1 && b <= this.#mean.length && ms > 0 && Number.isFinite(ms)).sort((x, y) => x[0] - y[0]);
    if (points.length === 0) return;
    const shape = new Float64Array(this.#mean.length);
    for (let i = 0; i < shape.length; i++) shape[i] = Math.max(i > 0 ? shape[i - 1]! : 0, interpolate(points, i + 1));
    this.#shape = shape;
    this.#stale = true;
  }

  /** The per-batch means (null where unmeasured) and step counts, index b − 1 (what restore takes back). */
  save(): SavedStepTimes {
    return { mean: Array.from(this.#mean, (m) => (Number.isNaN(m) ? null : m)), count: Array.from(this.#count) };
  }

  /**
   * Replaces the means and counts with saved ones for the same batch sizes; throws, changing
   * nothing, when `data` is not what save() returns for this many sizes. Returns the sizes measured.
   */
  restore(data: unknown): number {
    const d = data as Partial<SavedStepTimes> | null;
    const { mean, count } = d ?? {};
    const n = this.#mean.length;
    if (!Array.isArray(mean) || !Array.isArray(count) || mean.length !== n || count.length !== n) throw new Error(`expected { mean, count } for ${n} batch sizes`);
    for (let i = 0; i < n; i++) {
      const m = mean[i] as unknown;
      const c = count[i] as unknown;
      const ok = m === null ? c === 0 : typeof m === 'number' && Number.isFinite(m) && m >= 0 && typeof c === 'number' && Number.isSafeInteger(c) && c >= 1;
      if (!ok) throw new Error(`batch ${i + 1}: expected a mean ≥ 0 with a count ≥ 1, or null with 0`);
    }
    let measured = 0;
    for (let i = 0; i < n; i++) {
      this.#mean[i] = mean[i] === null ? NaN : (mean[i] as number);
      this.#count[i] = count[i] as number;
      if (mean[i] !== null) measured++;
    }
    this.#stale = true;
    this.#table = null;
    return measured;
  }

  /** The monotone step time by batch size (index b − 1), a fresh copy; null before any decode step. */
  table(): Float64Array | null {
    if (this.#stale) {
      this.#table = this.#build();
      this.#stale = false;
    }
    return this.#table === null ? null : this.#table.slice();
  }

  #build(): Float64Array | null {
    const n = this.#mean.length;
    let first = -1;
    let last = -1;
    for (let i = 0; i < n; i++) {
      if (Number.isNaN(this.#mean[i]!)) continue;
      if (first < 0) first = i;
      last = i;
    }
    const shape = this.#shape;
    if (first < 0) return shape === null ? null : shape.slice();
    const t = new Float64Array(n);
    let env = this.#mean[first]!;
    let from = first; // the largest measured size at or below i
    let settledFrom = -1; // the largest settled size below i, and the table there
    let settledEnv = NaN;
    // Unmeasured above a measured size: that size's time grown by the warm-up's shape; without
    // one, held between measured sizes and linear in the batch past the largest.
    const grown = (e: number, f: number, i: number): number => (shape !== null ? (e * shape[i]!) / shape[f]! : i > last ? (e * (i + 1)) / (last + 1) : e);
    // The most a size with few steps reads: the settled size below it grown by the shape, or linearly.
    const capped = (e: number, f: number, i: number): number => (shape !== null ? grown(e, f, i) : (e * (i + 1)) / (f + 1));
    for (let i = 0; i < n; i++) {
      let m = this.#mean[i]!;
      let v: number;
      if (!Number.isNaN(m)) {
        // A size with fewer steps than settle it reads no slower than the settled size below grown to it.
        if (this.#count[i]! < this.#settleSteps && settledFrom >= 0) m = Math.min(m, capped(settledEnv, settledFrom, i));
        env = Math.max(env, m);
        from = i;
        v = env;
        if (this.#count[i]! >= this.#settleSteps) {
          settledFrom = i;
          settledEnv = env;
        }
      } else if (i < first) v = env;
      else v = grown(env, from, i);
      t[i] = i > 0 ? Math.max(t[i - 1]!, v) : v;
    }
    return t;
  }
}

/** Step time at batch `b` from measured (batch, ms) points sorted by batch: see StepTimesByBatch.seed. */
function interpolate(points: ReadonlyArray<readonly [number, number]>, b: number): number {
  const first = points[0]!;
  const last = points[points.length - 1]!;
  if (b <= first[0]) return first[1];
  if (b >= last[0]) return (last[1] * b) / last[0];
  let k = 1;
  while (points[k]![0] < b) k++;
  const [b0, t0] = points[k - 1]!;
  const [b1, t1] = points[k]!;
  return t0 + ((t1 - t0) * (b - b0)) / (b1 - b0);
}

/** The step time a request decoding in a batch of `batch` sequences sees, ms, from the snapshot's table; null when unmeasured. */
export function stepMsAtBatch(table: Float64Array | null | undefined, batch: number): number | null {
  if (table === null || table === undefined || table.length === 0) return null;
  const b = Math.max(1, Math.ceil(batch));
  if (b <= table.length) return table[b - 1]!;
  return (table[table.length - 1]! * b) / table.length;
}

/**
 * The decode batch averaged over wall time: a continuous-time exponential mean with time constant
 * `tauMs`, fed one step at a time (a step of `ms` that decoded `batch` sequences), the time between
 * steps counting as batch 0 — so it falls back toward 0 while the engine idles, which a mean over
 * steps cannot do (an idle engine runs none). O(1), no allocation.
 */
export class RecentBatch {
  readonly #tauMs: number;
  #value = 0;
  #atMs: number | null = null;

  constructor(tauMs = 2000) {
    if (!(tauMs > 0)) throw new Error(`RecentBatch: expected tauMs > 0, got ${tauMs}`);
    this.#tauMs = tauMs;
  }

  /** One step from `startMs` to `endMs` that decoded `batch` sequences. */
  add(batch: number, startMs: number, endMs: number): void {
    if (!(endMs >= startMs) || !(batch >= 0)) return;
    this.#value = this.valueAt(startMs);
    this.#value = batch + (this.#value - batch) * Math.exp(-(endMs - startMs) / this.#tauMs);
    this.#atMs = endMs;
  }

  /** The mean as of `nowMs`: the idle time since the last step decays it toward 0. */
  valueAt(nowMs: number): number {
    if (this.#atMs === null) return 0;
    const idle = Math.max(0, nowMs - this.#atMs);
    return this.#value * Math.exp(-idle / this.#tauMs);
  }
}
