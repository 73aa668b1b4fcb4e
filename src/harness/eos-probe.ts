// Learns what the natural-length workloads need from the target itself, over HTTP only: the
// vocabulary size and the token that ends generation. The server publishes neither as such, so:
//
//   vocabulary  /detokenize answers 200 for an id inside [0, V) and 400 outside it (Headroom and
//               vLLM both check), so V is found by doubling then bisecting: about 2·log2 V requests.
//   EOS         a generation of one token forced by `logit_bias: {id: 100}` ends with finish_reason
//               "stop" exactly when the id ends generation (any other token ends at "length").
//               The candidates: the control tokens of a templated chat (they render as nothing;
//               the end-of-turn token is among them), then the low ids where SPM vocabularies keep
//               </s>. The first that stops wins, so a chat model's end-of-turn token is preferred.
//
// A server without /tokenize or /detokenize cannot be probed: the caller says so and asks for
// --eos-token-id and --vocab-size instead.
import { request } from 'undici';
import type { EosTarget } from './natural-length.ts';

export interface ProbeTarget {
  /** Base URL, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  /** Chat-completions path. */
  readonly path: string;
  readonly model: string;
  readonly headers?: Readonly<Record<string, string>>;
}

const LOW_IDS = 8;
const MAX_VOCAB = 1 << 24;
const TIMEOUT_MS = 30_000;

/** The EOS token and vocabulary size of the target, or why they could not be learned. */
export async function probeEos(t: ProbeTarget): Promise<EosTarget | string> {
  const vocabSize = await probeVocabSize(t);
  if (typeof vocabSize === 'string') return vocabSize;
  const candidates = await controlTokens(t);
  if (typeof candidates === 'string') return candidates;
  for (let id = 0; id < Math.min(LOW_IDS, vocabSize); id++) if (!candidates.includes(id)) candidates.push(id);
  for (const id of candidates) {
    const stops = await endsGeneration(t, id);
    if (typeof stops === 'string') return stops;
    if (stops) return { eosTokenId: id, vocabSize };
  }
  return `no token among ${candidates.join(', ')} ends generation on ${t.url}: pass --eos-token-id`;
}

async function post(t: ProbeTarget, route: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await request(new URL(route, t.url), {
    method: 'POST',
    headers: { ...t.headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    headersTimeout: TIMEOUT_MS,
    bodyTimeout: TIMEOUT_MS,
  });
  const text = await res.body.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON: callers read the status
  }
  return { status: res.statusCode, json };
}

/** Whether /detokenize accepts `id`; a string when the route is missing or broken. */
async function inVocab(t: ProbeTarget, id: number): Promise<boolean | string> {
  const r = await post(t, '/detokenize', { model: t.model, tokens: [id] });
  if (r.status === 200) return true;
  if (r.status === 400) return false;
  return `POST /detokenize answered HTTP ${r.status}: pass --vocab-size`;
}

async function probeVocabSize(t: ProbeTarget): Promise<number | string> {
  const first = await inVocab(t, 0);
  if (first !== true) return typeof first === 'string' ? first : 'POST /detokenize refused token 0: pass --vocab-size';
  // Invariant: lo ≤ V < hi (ids below lo are valid; once doubling stops, id hi − 1 is not).
  let lo = 1;
  let hi = 1024;
  for (;;) {
    const ok = await inVocab(t, hi - 1);
    if (typeof ok === 'string') return ok;
    if (!ok) break;
    lo = hi;
    hi *= 2;
    if (hi > MAX_VOCAB) return `POST /detokenize accepts ids past ${MAX_VOCAB}: pass --vocab-size`;
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    const ok = await inVocab(t, mid - 1);
    if (typeof ok === 'string') return ok;
    if (ok) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** Distinct tokens of a templated three-turn chat that render as nothing, in order of appearance. */
async function controlTokens(t: ProbeTarget): Promise<number[] | string> {
  const messages = [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: 'ok' },
    { role: 'user', content: 'hi' },
  ];
  const r = await post(t, '/tokenize', { model: t.model, messages });
  const tokens = (r.json as { tokens?: unknown } | null)?.tokens;
  if (r.status !== 200 || !Array.isArray(tokens)) return `POST /tokenize answered HTTP ${r.status}: pass --eos-token-id`;
  const out: number[] = [];
  for (const id of new Set(tokens.filter((x): x is number => Number.isInteger(x)))) {
    const d = await post(t, '/detokenize', { model: t.model, tokens: [id] });
    if (d.status === 200 && (d.json as { prompt?: unknown } | null)?.prompt === '') out.push(id);
  }
  return out;
}

/** Whether a generation forced onto `id` ends with "stop" (id ends generation). */
async function endsGeneration(t: ProbeTarget, id: number): Promise<boolean | string> {
  const r = await post(t, t.path, {
    model: t.model,
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 1,
    temperature: 0,
    logit_bias: { [id]: 100 },
  });
  if (r.status !== 200) return `a one-token probe with logit_bias on ${id} answered HTTP ${r.status}: pass --eos-token-id`;
  const finish = (r.json as { choices?: Array<{ finish_reason?: unknown }> } | null)?.choices?.[0]?.finish_reason;
  return finish === 'stop';
}
