// The soak's traffic: streaming chat completions with seeded prompts and output lengths, sent open
// loop (Poisson arrivals, so a slow server meets the same demand instead of a politely waiting
// client), a share of them cut by the client part-way through the stream (abortShare): the
// aborts are what a soak has to survive without leaking KV blocks, sequence ids or flow tickets.
// And the calibration that sizes it: a closed loop at the server's sequence slots, whose completed
// requests per second are the capacity for this request shape.
import { Rng } from '../../src/util/rng.ts';
import { promptText } from '../../src/harness/prompt-text.ts';

export interface RequestShape {
  readonly model: string;
  /** Prompt words, uniform in [min, max]. */
  readonly promptWords: readonly [number, number];
  /** max_tokens, uniform in [min, max] (ignore_eos: random weights rarely stop by themselves). */
  readonly maxTokens: readonly [number, number];
}

/** Running counts; read at every sample. */
export interface LoadCounts {
  sent: number;
  completed: number;
  /** Cut by the client on purpose, part-way through the stream. */
  aborted: number;
  /** 429 or 503: flow control or admission said no. */
  refused: number;
  /** Anything else: a non-200 other than a refusal, a stream without [DONE], a socket error. */
  errors: number;
  /** Requests whose answer has not ended yet. */
  inFlight: number;
}

export function newCounts(): LoadCounts {
  return { sent: 0, completed: 0, aborted: 0, refused: 0, errors: 0, inFlight: 0 };
}

/** One request; resolves when its answer ended (or it was cut after `cutAfterChunks` chunks, if given). */
export async function sendOne(url: string, shape: RequestShape, rng: Rng, counts: LoadCounts, cutAfterChunks: number | null): Promise<void> {
  const words = shape.promptWords[0] + rng.int(shape.promptWords[1] - shape.promptWords[0] + 1);
  const maxTokens = shape.maxTokens[0] + rng.int(shape.maxTokens[1] - shape.maxTokens[0] + 1);
  const body = JSON.stringify({ model: shape.model, messages: [{ role: 'user', content: promptText(rng, words) }], max_tokens: maxTokens, ignore_eos: true, stream: true });
  const ac = new AbortController();
  counts.sent++;
  counts.inFlight++;
  try {
    const res = await fetch(new URL('/v1/chat/completions', url), { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: ac.signal });
    if (res.status === 429 || res.status === 503) {
      await res.arrayBuffer();
      counts.refused++;
      return;
    }
    if (res.status !== 200 || res.body === null) {
      await res.arrayBuffer();
      counts.errors++;
      return;
    }
    let numChunks = 0;
    let tail = '';
    const decoder = new TextDecoder();
    for await (const part of res.body) {
      tail = (tail + decoder.decode(part as Uint8Array, { stream: true })).slice(-64);
      numChunks++;
      if (cutAfterChunks !== null && numChunks >= cutAfterChunks) {
        ac.abort();
        counts.aborted++;
        return;
      }
    }
    if (tail.includes('data: [DONE]')) counts.completed++;
    else counts.errors++;
  } catch (e) {
    if (!ac.signal.aborted) counts.errors++;
    void e;
  } finally {
    counts.inFlight--;
  }
}

export interface OpenLoopOptions {
  readonly url: string;
  readonly shape: RequestShape;
  readonly ratePerS: number;
  /** Share of requests the client cuts mid-stream, [0, 1]. */
  readonly abortShare: number;
  readonly seed: number;
  /** While this returns true, no new request is sent (the soak's quiet windows). */
  readonly paused: () => boolean;
}

/** Open-loop Poisson arrivals until stop(); stop() resolves once every request sent has ended. */
export class OpenLoop {
  readonly counts = newCounts();
  readonly #pending = new Set<Promise<void>>();
  #stopped = false;
  #timer: NodeJS.Timeout | null = null;

  constructor(readonly opts: OpenLoopOptions) {
    const arrivals = new Rng(opts.seed, 'arrivals');
    const requests = new Rng(opts.seed, 'requests');
    const next = (): void => {
      if (this.#stopped) return;
      this.#timer = setTimeout(() => {
        if (!opts.paused()) {
          const cut = requests.uniform() < opts.abortShare ? 1 + requests.int(Math.max(1, Math.floor(opts.shape.maxTokens[0] / 2))) : null;
          const p = sendOne(opts.url, opts.shape, requests, this.counts, cut);
          this.#pending.add(p);
          void p.finally(() => this.#pending.delete(p));
        }
        next();
      }, arrivals.exponential(opts.ratePerS) * 1000);
    };
    next();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    await Promise.all(this.#pending);
  }
}

/** Completed requests per second with `concurrency` clients each sending the next at once, over `seconds`. */
export async function calibrate(url: string, shape: RequestShape, concurrency: number, seconds: number, seed: number): Promise<number> {
  const counts = newCounts();
  const rng = new Rng(seed, 'calibration');
  const endMs = performance.now() + seconds * 1000;
  const startMs = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < endMs) await sendOne(url, shape, rng, counts, null);
    }),
  );
  return counts.completed / ((performance.now() - startMs) / 1000);
}
