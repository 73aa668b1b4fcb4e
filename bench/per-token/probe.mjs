// Per-request probes of one running server (Headroom, or llama-server behind bench/peer/chat-proxy.ts),
// streamed /v1/chat/completions, one scenario at a time, nothing else in flight: where the
// open-loop comparison (bench/peer/long.sh) mixes everything, these isolate one situation each.
// Prompts are random words (a fixed seed per mode), so two servers get the same requests.
//
//   node bench/per-token/probe.mjs URL MODE [N]      (bench/per-token/probe.sh starts the server)
//
// MODE
//   solo     N requests one after another: a unique prompt of WORDS words (default 600, ~1,200
//            tokens), MAXTOK tokens out (default 64); TTFT p50 and the median of each request's
//            median inter-token gap.
//   overlap  N rounds: X (600 words, 200 out), then after DELAY ms (default 300) Y (WORDS, default 900,
//            64 out); Y's TTFT, X's ITL p50 and max.
//   shared   a document of DOCW words (default 1,100) as the system message + a question of QW
//            words (default 200); between two measured requests GAP (default 2) unique prompts of UW
//            words (default 1,700): TTFT of the document requests (the prefix cache's case).
//   after    3 requests; after each, the server's CPU time (all threads, from /proc/PID) over the
//            next 1.5 s (PID from the environment): what it burns once idle.
import { readFileSync, readdirSync } from 'node:fs';

const [url, mode, nArg] = process.argv.slice(2);
if (url === undefined || mode === undefined) throw new Error('usage: probe.mjs URL solo|overlap|shared|after [N]');
const n = Number(nArg ?? 8);
const env = (k, d) => Number(process.env[k] ?? d);
const VOCAB = 'alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega river stone cloud field light order quiet number table window paper garden engine market signal'.split(' ');
let state = { solo: 12345, overlap: 777, shared: 4242, after: 99 }[mode] ?? 1;
const rnd = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
const words = (w) => Array.from({ length: w }, () => VOCAB[Math.floor(rnd() * VOCAB.length)]).join(' ');
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const model = (await (await fetch(`${url}/v1/models`)).json()).data[0].id;

/** One streamed chat completion: TTFT (first non-empty content), the gaps between later content events, E2E. */
async function ask(messages, maxTokens) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages, max_tokens: maxTokens, stream: true, temperature: 1 }),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const dec = new TextDecoder();
  let buf = '';
  let ttft = null;
  let last = 0;
  const gaps = [];
  for await (const chunk of res.body) {
    buf += dec.decode(chunk, { stream: true });
    for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const text = JSON.parse(ev.slice(6)).choices?.[0]?.delta?.content;
      if (typeof text !== 'string' || text.length === 0) continue;
      const now = performance.now() - t0;
      if (ttft === null) ttft = now;
      else gaps.push(now - last);
      last = now;
    }
  }
  return { ttft, gaps, e2e: performance.now() - t0 };
}
const user = (content) => [{ role: 'user', content }];
const list = (xs) => xs.map((x) => x.toFixed(0)).join(' ');

if (mode === 'solo') {
  const ttfts = [];
  const itls = [];
  for (let i = 0; i < n; i++) {
    const r = await ask(user(`${i} ${words(env('WORDS', 600))}`), env('MAXTOK', 64));
    ttfts.push(r.ttft);
    if (r.gaps.length > 0) itls.push(median(r.gaps));
  }
  console.log(`solo: TTFT p50 ${median(ttfts).toFixed(1)} ms, ITL p50 ${median(itls).toFixed(2)} ms [TTFT ${list(ttfts)}]`);
} else if (mode === 'overlap') {
  const y = [];
  const xItl = [];
  const xMax = [];
  for (let r = 0; r < n; r++) {
    const x = ask(user(`${words(600)} x${r}`), 200);
    await new Promise((res) => setTimeout(res, env('DELAY', 300)));
    y.push((await ask(user(`${words(env('WORDS', 900))} y${r}`), 64)).ttft);
    const xr = await x;
    xItl.push(median(xr.gaps));
    xMax.push(Math.max(...xr.gaps));
  }
  console.log(`overlap (delay ${env('DELAY', 300)} ms): Y TTFT p50 ${median(y).toFixed(0)} ms [${list(y)}]; X ITL p50 ${median(xItl).toFixed(2)} ms, X ITL max p50 ${median(xMax).toFixed(0)} ms`);
} else if (mode === 'shared') {
  const doc = words(env('DOCW', 1100));
  const ttfts = [];
  await ask([{ role: 'system', content: doc }, { role: 'user', content: words(env('QW', 200)) }], 8);
  for (let r = 0; r < n; r++) {
    for (let g = 0; g < env('GAP', 2); g++) await ask(user(`${words(env('UW', 1700))} u${r}.${g}`), 16);
    ttfts.push((await ask([{ role: 'system', content: doc }, { role: 'user', content: `${words(env('QW', 200))} q${r}` }], 8)).ttft);
  }
  console.log(`shared (gap ${env('GAP', 2)}): document request TTFT p50 ${median(ttfts).toFixed(0)} ms [${list(ttfts)}]`);
} else if (mode === 'after') {
  const pid = process.env['PID'];
  if (pid === undefined) throw new Error('after: set PID to the server process');
  const ticks = (stat) => {
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // utime + stime, in ms at 100 ticks a second
  };
  const perThread = () => new Map(readdirSync(`/proc/${pid}/task`).map((t) => [t, ticks(readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8'))]));
  for (let r = 0; r < 3; r++) {
    await ask(user(`${words(600)} r${r}`), 64);
    const before = perThread();
    await new Promise((res) => setTimeout(res, 1500));
    const after = perThread();
    const used = [...after].map(([t, ms]) => ms - (before.get(t) ?? ms)).filter((ms) => ms > 0);
    console.log(`after request ${r}: ${used.reduce((a, b) => a + b, 0)} ms of CPU over the next 1.5 s (threads: ${used.join(', ') || 'none'})`);
  }
} else {
  throw new Error(`unknown mode ${mode}`);
}
