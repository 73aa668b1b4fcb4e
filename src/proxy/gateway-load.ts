// What admission control reads in gateway mode: the gateway's own view of the work it has sent
// upstream, in the shape of an engine snapshot (engine/snapshot.ts), so the same features, the same
// conformal controller and the same trained-artifact code serve both modes.
//
// The gateway has no scheduler to ask, but it sees every request it forwards, exactly and at once:
// when it arrived, its budget, its prompt's size, its output cap, when its first output came and
// how many followed. Scraped /metrics say the same things late (every scrape interval) and only for
// what the engine counts, so the counts here come from the gateway's own books, one set per
// upstream (a request is decided on the books of the upstream the picker would send it to):
//
//   waiting                 forwarded, no output yet (queued upstream or prefilling there)
//   running                 streaming output
//   prompt work by deadline the waiting requests' prompt tokens, cumulative in deadline order
//   remaining decode tokens max_tokens × n less the output seen, over every request in flight
//   sequence slots          what the upstream said it has (llama-server's /props total_slots, or
//                           --upstream-slots), less the requests in flight; 0 when it did not say
//   KV                      its scraped KV usage
//   step time               the gaps between output events (an upstream's decode step, as a stream
//                           sees it): a short and a long exponential average
//   decode rate             output events per second over its streams, in 500 ms windows; a
//                           non-streamed answer's tokens count when its body arrives
//   prefill rate            per first output: (prompt tokens ahead at its arrival + its own) / TTFT —
//                           a lower bound on the upstream's prefill rate, since TTFT also holds time
//                           spent waiting for a slot; that errs towards refusing
//
// Prompt tokens are estimated from the prompt's bytes (LearnedPromptSizer, one per gateway) at a ratio
// learned from the usage upstreams report (`stream_options.include_usage`, or a non-streamed body's usage); 4 bytes a token until one
// does. The estimate, not a tokenizer's count, is what the features hold: training and deciding see
// the same estimate.
//
// Cost: begin/output/end are O(1); a snapshot is rebuilt only when something changed since the last
// one, in O(in flight · log) (a sort of the waiting requests by deadline).
//
// The API reaches the books through the seam (backend/backend.ts declares `GatewayLoad`,
// `LoadEntry` and `PromptSizer`; this file implements them), so the backend layer never imports the
// proxy.

import type { GatewayLoad, LoadEntry, PromptSizer } from '../backend/backend.ts';
import type { SchedulerSnapshot } from '../engine/scheduler/scheduler.ts';
import type { EngineSnapshot } from '../engine/snapshot.ts';
import { Ewma, OutputLengths } from '../engine/snapshot.ts';

/** What the books read of the upstream they keep (the pool knows it). */
export interface UpstreamFacts {
  /** Its sequence slots while it can serve (0: it did not say, or it is out of the pool). */
  slots(): number;
  /** Its scraped KV usage, 0..1; null when it reports none. */
  kvUsage(): number | null;
}

export const DEFAULT_BYTES_PER_TOKEN = 4;

/**
 * Prompt tokens from prompt bytes, at the ratio the upstreams' usage reports teach (4 bytes a
 * token until one does). One per gateway: the ratio belongs to the model's tokenizer, not to an
 * upstream, and a prompt's size is needed before its upstream is chosen.
 */
export class LearnedPromptSizer implements PromptSizer {
  readonly #bytesPerToken = new Ewma(0.1);

  estimateTokens(bytes: number): number {
    return Math.max(1, Math.ceil(bytes / this.bytesPerToken));
  }

  /** An upstream reported a prompt's token count. */
  learn(bytes: number, tokens: number): void {
    if (bytes > 0 && tokens > 0) this.#bytesPerToken.add(bytes / tokens);
  }

  get bytesPerToken(): number {
    return this.#bytesPerToken.value ?? DEFAULT_BYTES_PER_TOKEN;
  }
}
const DECODE_WINDOW_MS = 500;
/** Scale of the pretend block pool that carries the scraped KV usage into the snapshot. */
const KV_SCALE = 1000;

const NO_UPSTREAM_FACTS: UpstreamFacts = { slots: () => 0, kvUsage: () => null };

/** One upstream's books (`GatewayLoad`, the seam's view of them). */
export class GatewayBooks implements GatewayLoad {
  readonly #now: () => number;
  readonly #upstreams: UpstreamFacts;
  readonly #inFlight = new Set<LoadEntry>();
  readonly #stepMs = new Ewma(0.2);
  readonly #longStepMs = new Ewma(1 / 256);
  /** How long outputs ran before they ended, as the engine keeps it (EngineSnapshot.outputTokensP90). */
  readonly #outputLengths = new OutputLengths();
  readonly #prefillRate = new Ewma(0.2);
  readonly #decodeRate = new Ewma(0.3);
  #windowStartMs: number | null = null;
  #windowTokens = 0;
  #snapshot: EngineSnapshot | null = null;
  #numSnapshots = 0;

  constructor(now: () => number, upstreams: UpstreamFacts = NO_UPSTREAM_FACTS) {
    this.#now = now;
    this.#upstreams = upstreams;
  }

  get numInFlight(): number {
    return this.#inFlight.size;
  }

  /** A request goes upstream (after admission); paired with `end`. */
  begin(r: { readonly arrivalMs: number; readonly deadlineMs: number; readonly promptTokens: number; readonly decodeTokens: number }): LoadEntry {
    const ahead = this.#workAhead(r.deadlineMs);
    const e: LoadEntry = { ...r, workAheadAtArrival: ahead, outputTokens: 0, firstOutputMs: null, ended: false };
    this.#inFlight.add(e);
    this.#snapshot = null;
    return e;
  }

  /** `count` output events arrived for `e` at `nowMs`, each `gapMs` after the one before (0 for the first). */
  output(e: LoadEntry, count: number, gapMs: number, nowMs: number): void {
    if (e.ended || count <= 0) return;
    if (e.firstOutputMs === null) {
      e.firstOutputMs = nowMs;
      const ttftS = (nowMs - e.arrivalMs) / 1000;
      if (ttftS > 0) this.#prefillRate.add((e.workAheadAtArrival + e.promptTokens) / ttftS);
    } else if (gapMs > 0) {
      this.#stepMs.add(gapMs);
      this.#longStepMs.add(gapMs);
    }
    e.outputTokens += count;
    this.#countDecode(count, nowMs);
    this.#snapshot = null;
  }

  /**
   * A non-streamed answer for `e` arrived whole at `nowMs`, with `count` output tokens (its usage).
   * The tokens count towards the decode rate, at the moment they arrived: over several such
   * answers that is output per second between completions, the same aggregate rate the streams'
   * windows measure. No prefill or step-time sample: a whole body shows neither a first token nor
   * the gaps between tokens.
   */
  wholeOutput(e: LoadEntry, count: number, nowMs: number): void {
    if (e.ended || count <= 0) return;
    e.outputTokens += count;
    this.#countDecode(count, nowMs);
    this.#snapshot = null;
  }

  outputEnded(e: LoadEntry, onItsOwn: boolean): void {
    if (e.ended) return;
    this.#outputLengths.add(e.outputTokens, onItsOwn);
    this.#snapshot = null;
  }

  /** `e` is over, however it ended (idempotent). */
  end(e: LoadEntry): void {
    if (e.ended) return;
    e.ended = true;
    this.#inFlight.delete(e);
    this.#snapshot = null;
  }

  /** The books as an engine snapshot; rebuilt only after a change (or `fresh`). */
  snapshot(fresh = false): EngineSnapshot {
    if (this.#snapshot !== null && !fresh) return this.#snapshot;
    const nowMs = this.#now();
    let numWaiting = 0;
    let waitingPromptTokens = 0;
    let remainingDecodeTokens = 0;
    const work: { deadlineMs: number; tokens: number }[] = [];
    for (const e of this.#inFlight) {
      remainingDecodeTokens += Math.max(0, e.decodeTokens - e.outputTokens);
      if (e.firstOutputMs !== null) continue;
      numWaiting++;
      waitingPromptTokens += e.promptTokens;
      work.push({ deadlineMs: e.deadlineMs, tokens: e.promptTokens });
    }
    work.sort((a, b) => a.deadlineMs - b.deadlineMs);
    let sum = 0;
    const promptWorkByDeadline = work.map((w) => ({ deadlineMs: w.deadlineMs, cumulativeTokens: (sum += w.tokens) }));
    const numRunning = this.#inFlight.size - numWaiting;
    const slots = this.#upstreams.slots();
    const kv = this.#upstreams.kvUsage();
    const numBlocks = kv === null ? 0 : KV_SCALE;
    const numFreeBlocks = kv === null ? 0 : Math.round((1 - kv) * KV_SCALE);
    const numFreeSeqIds = Math.max(0, slots - this.#inFlight.size);
    const scheduler: SchedulerSnapshot = {
      name: 'gateway',
      numWaiting,
      numRunning,
      numFreeSeqIds,
      maxSequences: slots,
      numPreemptions: 0,
      kv: { mode: 'none', numBlocks, numFreeBlocks, blockSize: 1, usage: kv ?? 0, fragmentation: 0, prefixCache: null, numCopyOnWrite: 0 },
      stopReason: numWaiting === 0 ? 'none_waiting' : 'max_running',
      numReservedBlocks: 0,
      numFreeBlocks,
    };
    this.#snapshot = Object.freeze({
      numSteps: this.#numSnapshots++,
      atMs: nowMs,
      numWaiting,
      numRunning,
      numFreeSeqIds,
      maxSequences: slots,
      numBlocks,
      numFreeBlocks,
      blockSize: 1,
      waitingPromptTokens,
      runningPromptTokens: 0,
      remainingDecodeTokens,
      promptWorkByDeadline,
      avgStepMs: this.#stepMs.value,
      longStepMs: this.#longStepMs.value,
      prefillTokensPerS: this.#prefillRate.value,
      decodeTokensPerS: this.#decodeRate.value,
      outputTokensP90: this.#outputLengths.value,
      scheduler,
    });
    return this.#snapshot;
  }

  /** For /stats. */
  state(): Record<string, unknown> {
    const r = (v: number | null): number | null => (v === null ? null : Math.round(v * 100) / 100);
    return {
      numInFlight: this.#inFlight.size,
      stepMs: r(this.#stepMs.value),
      longStepMs: r(this.#longStepMs.value),
      prefillTokensPerS: r(this.#prefillRate.value),
      decodeTokensPerS: r(this.#decodeRate.value),
      slots: this.#upstreams.slots(),
    };
  }

  /** Prompt tokens of the waiting requests due no later than `deadlineMs`. */
  #workAhead(deadlineMs: number): number {
    let n = 0;
    for (const e of this.#inFlight) if (e.firstOutputMs === null && e.deadlineMs <= deadlineMs) n += e.promptTokens;
    return n;
  }

  /** Output events per second over all streams, in windows of DECODE_WINDOW_MS with output in them. */
  #countDecode(count: number, nowMs: number): void {
    if (this.#windowStartMs === null) {
      this.#windowStartMs = nowMs;
      this.#windowTokens = count;
      return;
    }
    const elapsed = nowMs - this.#windowStartMs;
    if (elapsed >= DECODE_WINDOW_MS) {
      // An idle stretch (nothing streamed for several windows) is not a slow decode: such a window starts afresh.
      if (elapsed < 4 * DECODE_WINDOW_MS) this.#decodeRate.add((1000 * this.#windowTokens) / elapsed);
      this.#windowStartMs = nowMs;
      this.#windowTokens = count;
      return;
    }
    this.#windowTokens += count;
  }
}
