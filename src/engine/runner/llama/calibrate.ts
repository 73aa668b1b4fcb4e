// Calibration of the llama runner on this machine: prefill and decode throughput, a mixed step,
// tokenize time, and the addon's own overhead per step (JS-side execute() time minus the C++-side
// llama_decode and sampling time). Every figure is a median over repeats, with min and max: the
// machines are shared and noisy. Results feed SLO and rate choices (results/calibration/).
import { asSeqId } from '../../plan.ts';
import type { RunnerPlan, StepItem } from '../../plan.ts';
import type { LlamaRunner } from './llama-runner.ts';
import { bug } from '../../../util/bug.ts';

export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly n: number;
}

export function spread(xs: readonly number[]): Spread {
  if (xs.length === 0) bug('spread of no samples');
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  const r = (x: number): number => Math.round(x * 1000) / 1000;
  return { median: r(median), min: r(s[0]!), max: r(s[s.length - 1]!), n: s.length };
}

/** Per-step timing split: where one step's wall time goes. */
export interface StepSplit {
  /** execute() wall time, JS side (what the engine waits for). */
  readonly executeMs: Spread;
  /** llama_decode alone, C++ side. */
  readonly decodeMs: Spread;
  /** native sampling of the flagged rows, C++ side. */
  readonly sampleMs: Spread;
  /** executeMs − decode − sampling: row packing, N-API crossings, thread hand-off, promise resolution. */
  readonly overheadMs: Spread;
  /** overheadMs / executeMs (median of per-step ratios). */
  readonly overheadShare: Spread;
}

export interface DecodeResult extends StepSplit {
  readonly batch: number;
  /** batch / median step time. */
  readonly aggregateTokPerS: Spread;
  /** Worst event-loop timer lag seen while these steps ran (a 10 ms interval timer). */
  readonly maxTimerLagMs: number;
}

export interface CalibrationResults {
  readonly tokenizeMsPer512Tokens: Spread;
  readonly prefill512: StepSplit & { readonly tokPerS: Spread };
  readonly decode: readonly DecodeResult[];
  readonly mixed: StepSplit & { readonly prefillTokens: number; readonly decodeSeqs: number };
}

export interface CalibrationOptions {
  readonly prefillRepeats: number;
  readonly decodeSteps: number;
  readonly batches: readonly number[];
  readonly contextPerSeq: number;
  /** Called with a progress line. */
  readonly log: (line: string) => void;
}

const GREEDY = { temperature: 0, topP: 1, seed: 0 };

function item(seq: number, tokens: readonly number[], startPos: number, sample: boolean): StepItem {
  return { requestId: `cal${seq}`, seqId: asSeqId(seq), tokens, startPos, sample, resetSampler: startPos === 0, sampling: GREEDY };
}

function clearAll(runner: LlamaRunner): RunnerPlan['kvOps'] {
  return Array.from({ length: runner.info.maxSequences }, (_, s) => ({ kind: 'remove' as const, seqId: asSeqId(s), p0: 0, p1: -1 }));
}

interface Sample {
  executeMs: number;
  decodeMs: number;
  sampleMs: number;
}

async function step(runner: LlamaRunner, p: RunnerPlan): Promise<{ sample: Sample; sampled: readonly (number | null)[] }> {
  const res = await runner.execute(p);
  if (!res.ok) throw new Error(`calibration step refused: ${res.reason}: ${res.message}`);
  const t = runner.lastTiming;
  if (t === null) bug('no timing after a step');
  return { sample: { executeMs: t.executeMs, decodeMs: t.decodeUs / 1000, sampleMs: t.sampleUs / 1000 }, sampled: res.sampled };
}

function split(samples: readonly Sample[]): StepSplit {
  const over = samples.map((s) => Math.max(0, s.executeMs - s.decodeMs - s.sampleMs));
  return {
    executeMs: spread(samples.map((s) => s.executeMs)),
    decodeMs: spread(samples.map((s) => s.decodeMs)),
    sampleMs: spread(samples.map((s) => s.sampleMs)),
    overheadMs: spread(over),
    overheadShare: spread(samples.map((s, i) => over[i]! / s.executeMs)),
  };
}

/** A prompt of exactly n tokens (BOS first) from ordinary text. */
export function calibrationPrompt(runner: LlamaRunner, n: number, salt = 0): number[] {
  const words = 'the model serves each request inside its latency budget while the queue grows and the cache keeps shared prefixes warm'.split(' ');
  let text = '';
  for (let i = 0; text.length < n * 10; i++) text += `${words[(i * 5 + salt) % words.length]} `;
  const toks = runner.tokenizer.tokenize(text, true).slice(0, n);
  if (toks.length < n) bug(`calibration prompt has ${toks.length} tokens, wanted ${n}`);
  return toks;
}

export async function calibrate(runner: LlamaRunner, opts: CalibrationOptions): Promise<CalibrationResults> {
  const { log } = opts;
  // Tokenize: the text of ~512 tokens, 20 times.
  const text512 = (() => {
    const ids = calibrationPrompt(runner, 512);
    const d = runner.tokenizer.detokenizer();
    return ids.map((t) => d.push(t)).join('') + d.flush();
  })();
  const tokTimes: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now();
    const n = runner.tokenizer.tokenize(text512, true).length;
    tokTimes.push(((performance.now() - t0) * 512) / n);
  }
  const tokenizeMsPer512Tokens = spread(tokTimes);
  log(`tokenize: ${tokenizeMsPer512Tokens.median} ms per 512 tokens`);

  // Prefill: a 512-token prompt in one step, into an empty pool (one warm-up step first).
  const prompt = calibrationPrompt(runner, 512);
  const prefillSamples: Sample[] = [];
  for (let i = 0; i <= opts.prefillRepeats; i++) {
    const { sample } = await step(runner, { kvOps: clearAll(runner), items: [item(0, prompt, 0, true)] });
    if (i > 0) prefillSamples.push(sample);
  }
  const prefillSplit = split(prefillSamples);
  const prefill512 = { ...prefillSplit, tokPerS: spread(prefillSamples.map((s) => 512_000 / s.executeMs)) };
  log(`prefill 512: ${prefill512.tokPerS.median} tok/s (${prefill512.tokPerS.min}–${prefill512.tokPerS.max})`);

  // Decode at each batch size: B sequences, each with a contextPerSeq-token prompt, then steps.
  const decode: DecodeResult[] = [];
  for (const batch of opts.batches) {
    const ctx = calibrationPrompt(runner, opts.contextPerSeq);
    const kvOps = clearAll(runner);
    let last: number[] = [];
    // Prefill the batch's prompts, as many per step as fit in a forward pass.
    const perStep = Math.max(1, Math.floor(runner.info.maxBatchTokens / ctx.length));
    for (let s0 = 0; s0 < batch; s0 += perStep) {
      const seqs = Array.from({ length: Math.min(perStep, batch - s0) }, (_, k) => s0 + k);
      const { sampled } = await step(runner, { kvOps: s0 === 0 ? kvOps : [], items: seqs.map((s) => item(s, ctx, 0, true)) });
      last.push(...(sampled as number[]));
    }
    const samples: Sample[] = [];
    let maxLag = 0;
    let prev = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      maxLag = Math.max(maxLag, now - prev - 10);
      prev = now;
    }, 10);
    try {
      for (let i = 0; i <= opts.decodeSteps; i++) {
        const items = last.map((t, s) => item(s, [t], ctx.length + i, true));
        const { sample, sampled } = await step(runner, { kvOps: [], items });
        last = sampled as number[];
        if (i > 0) samples.push(sample);
      }
    } finally {
      clearInterval(timer);
    }
    const sp = split(samples);
    const r: DecodeResult = {
      batch,
      ...sp,
      aggregateTokPerS: spread(samples.map((s) => (batch * 1000) / s.executeMs)),
      maxTimerLagMs: Math.round(maxLag * 10) / 10,
    };
    decode.push(r);
    log(
      `decode batch ${batch}: ${r.aggregateTokPerS.median} tok/s aggregate, step ${r.executeMs.median} ms ` +
        `(llama_decode ${r.decodeMs.median} ms, overhead ${(r.overheadShare.median * 100).toFixed(1)}%)`,
    );
  }

  // Mixed: one 256-token prefill chunk plus 8 decoding sequences in one forward pass.
  const decodeSeqs = 8;
  const prefillTokens = 256;
  const ctx = calibrationPrompt(runner, opts.contextPerSeq);
  const chunk = calibrationPrompt(runner, prefillTokens, 3);
  const perStep = Math.max(1, Math.floor(runner.info.maxBatchTokens / ctx.length));
  for (let s0 = 0; s0 < decodeSeqs; s0 += perStep) {
    const seqs = Array.from({ length: Math.min(perStep, decodeSeqs - s0) }, (_, k) => s0 + k);
    await step(runner, { kvOps: s0 === 0 ? clearAll(runner) : [], items: seqs.map((s) => item(s, ctx, 0, true)) });
  }
  const mixedSamples: Sample[] = [];
  for (let i = 0; i <= opts.prefillRepeats; i++) {
    const items = [
      item(decodeSeqs, chunk, 0, true),
      ...Array.from({ length: decodeSeqs }, (_, s) => item(s, [chunk[s]!], ctx.length + i, true)),
    ];
    const remove = { kind: 'remove' as const, seqId: asSeqId(decodeSeqs), p0: 0, p1: -1 };
    const { sample } = await step(runner, { kvOps: [remove], items });
    if (i > 0) mixedSamples.push(sample);
  }
  const mixed = { ...split(mixedSamples), prefillTokens, decodeSeqs };
  log(`mixed (256 prefill + 8 decode): step ${mixed.executeMs.median} ms`);
  await step(runner, { kvOps: clearAll(runner), items: [] });
  return { tokenizeMsPer512Tokens, prefill512, decode, mixed };
}
