// Benchmark (not a test): what a long prompt does to everyone else's inter-token latency.
//
// Against a running server: stream A (a short prompt, many output tokens) decodes; once it has
// produced --lead tokens, request B arrives with a --long-tokens prompt (and max_tokens 1). A's
// token arrival times give its ITL inside the window B's prefill occupies (from B's send to B's
// completion) and outside it (A decoding alone). Repeated --reps times, each with a fresh prompt
// (no prefix-cache hits between reps).
//
//   node --import tsx bench/per-token/long-prefill-itl.ts --url http://127.0.0.1:8321 [--long-tokens 6000]
//        [--tokens-per-word 1] [--reps 3] [--lead 30] [--tpot-ms N] [--json out.json]
import { writeFileSync } from 'node:fs';
import { Rng } from '../../src/util/rng.ts';
import { promptText, wordsForTokens } from '../../src/harness/prompt-text.ts';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1]! : dflt;
};
const url = opt('--url', 'http://127.0.0.1:8321');
const longTokens = Number(opt('--long-tokens', '6000'));
const tpw = Number(opt('--tokens-per-word', '1'));
const reps = Number(opt('--reps', '3'));
const lead = Number(opt('--lead', '30'));
const outputTokens = Number(opt('--output-tokens', '1500'));
const jsonOut = opt('--json', '');
/** With --tpot-ms: stream A sends it as x-slo-tpot-ms, and B a 120 s x-slo-ms (its prefill then takes longer than the default budget). */
const tpotMs = opt('--tpot-ms', '');

const model = ((await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
const p99 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(0.99 * (xs.length - 1))] ?? NaN;
const r2 = (x: number): number => Math.round(x * 100) / 100;

interface Rep {
  rep: number;
  longPromptTokens: number;
  longMs: number;
  itlInsideMs: number[];
  itlOutsideMedianMs: number;
  insideMedianMs: number;
  insideMaxMs: number;
  ratioMaxToMedian: number;
  /** The same stream's ITL outside B's prefill: all of it, its 99th percentile and max. */
  itlOutsideMs: number[];
  outsideP99Ms: number;
  outsideMaxMs: number;
  insideP99Ms: number;
  /** Median of every ITL of the stream, inside and outside. */
  streamMedianMs: number;
}

async function streamA(prompt: string, onToken: (t: number) => void): Promise<void> {
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(tpotMs === '' ? {} : { 'x-slo-tpot-ms': tpotMs }) },
    body: JSON.stringify({ model, prompt, max_tokens: outputTokens, ignore_eos: true, stream: true, temperature: 0 }),
  });
  if (!res.ok || res.body === null) throw new Error(`stream A: HTTP ${res.status}: ${await res.text()}`);
  const dec = new TextDecoder();
  let buf = '';
  for await (const chunk of res.body) {
    buf += dec.decode(chunk as Uint8Array, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (ev.startsWith('data: ') && !ev.includes('[DONE]') && ev.includes('"text"')) onToken(performance.now());
    }
  }
}

const results: Rep[] = [];
for (let rep = 0; rep < reps; rep++) {
  const rng = new Rng(1000 + rep, 'long-prefill-itl');
  const times: number[] = [];
  let bStart = 0;
  let bEnd = 0;
  let longPromptTokens = 0;
  let fired = false;
  let bDone: Promise<void> = Promise.resolve();
  const a = streamA(`Stream ${rep}. ${promptText(rng, 20)}`, (t) => {
    times.push(t);
    if (!fired && times.length >= lead) {
      fired = true;
      bStart = performance.now();
      bDone = fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(tpotMs === '' ? {} : { 'x-slo-ms': '120000' }) },
        body: JSON.stringify({ model, prompt: `Long ${rep}. ${promptText(rng, wordsForTokens(longTokens, tpw))}`, max_tokens: 1, temperature: 0 }),
      }).then(async (r) => {
        const body = (await r.json()) as { usage?: { prompt_tokens: number }; error?: { message: string } };
        if (!r.ok) throw new Error(`request B: HTTP ${r.status}: ${body.error?.message}`);
        longPromptTokens = body.usage?.prompt_tokens ?? 0;
        bEnd = performance.now();
      });
    }
  });
  await a;
  await bDone;
  const itl = times.slice(1).map((t, i) => ({ at: t, ms: t - times[i]! }));
  const inside = itl.filter((x) => x.at > bStart && x.at <= bEnd + 1).map((x) => x.ms);
  const outside = itl.filter((x) => x.at < bStart || x.at > bEnd + 50).map((x) => x.ms);
  const r: Rep = {
    rep,
    longPromptTokens,
    longMs: bEnd - bStart,
    itlInsideMs: inside.map(r2),
    itlOutsideMedianMs: median(outside),
    insideMedianMs: median(inside),
    insideMaxMs: Math.max(...inside),
    ratioMaxToMedian: Math.max(...inside) / median(inside),
    itlOutsideMs: outside.map(r2),
    outsideP99Ms: p99(outside),
    outsideMaxMs: Math.max(...outside),
    insideP99Ms: p99(inside),
    streamMedianMs: median(itl.map((x) => x.ms)),
  };
  results.push(r);
  console.log(
    `rep ${rep}: B ${longPromptTokens} prompt tokens in ${r.longMs.toFixed(0)} ms; A's ITL during it: median ${r.insideMedianMs.toFixed(1)} ms, ` +
      `p99 ${r.insideP99Ms.toFixed(1)}, max ${r.insideMaxMs.toFixed(1)} ms (${r.ratioMaxToMedian.toFixed(2)}x, ${inside.length} tokens); ` +
      `A alone: median ${r.itlOutsideMedianMs.toFixed(2)}, p99 ${r.outsideP99Ms.toFixed(1)}, max ${r.outsideMaxMs.toFixed(1)} ms (${outside.length} tokens); ` +
      `A's median over the stream ${r.streamMedianMs.toFixed(2)} ms: max during B ${(r.insideMaxMs / r.streamMedianMs).toFixed(1)}x it, p99 during B ${(r.insideP99Ms / r.streamMedianMs).toFixed(1)}x`,
  );
}
if (jsonOut !== '') writeFileSync(jsonOut, JSON.stringify({ url, model, longTokens, tokensPerWord: tpw, lead, outputTokens, tpotMs: tpotMs === '' ? null : Number(tpotMs), results }, null, 2) + '\n');
