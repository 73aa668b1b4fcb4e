// Reading an upstream's load from its Prometheus /metrics text. Engines name the same three facts
// differently; the first name found in each row of NAMES wins:
//
//   fact      vLLM (v1 / v0)                                   SGLang                  llama-server                 Headroom
//   waiting   vllm:num_requests_waiting                        sglang:num_queue_reqs   llamacpp:requests_deferred   headroom_requests_waiting
//   running   vllm:num_requests_running                        sglang:num_running_reqs llamacpp:requests_processing headroom_requests_running
//   kv usage  vllm:kv_cache_usage_perc, vllm:gpu_cache_usage_perc sglang:token_usage    llamacpp:kv_cache_usage_ratio headroom_kv_usage_ratio
//
// (A Headroom engine also exports the vLLM names; its own come first so a Headroom upstream is read
// by them.) Several series of one name (one per model_name, or per rank) are summed for counts and
// the largest taken for KV usage. A fact no name covers is null: the picker scores what it has.
//
// The parser reads only sample lines of the names it looks for (`name{labels} value [ts]`); it never
// throws on odd text, it finds fewer facts.

/** What one scrape said about an upstream's load. */
export interface UpstreamLoad {
  /** Requests queued in the engine, not yet running. */
  readonly numWaiting: number | null;
  readonly numRunning: number | null;
  /** Share of the KV cache in use, 0..1. */
  readonly kvUsage: number | null;
}

const NAMES = {
  numWaiting: ['headroom_requests_waiting', 'vllm:num_requests_waiting', 'sglang:num_queue_reqs', 'llamacpp:requests_deferred'],
  numRunning: ['headroom_requests_running', 'vllm:num_requests_running', 'sglang:num_running_reqs', 'llamacpp:requests_processing'],
  kvUsage: ['headroom_kv_usage_ratio', 'vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc', 'sglang:token_usage', 'llamacpp:kv_cache_usage_ratio'],
} as const;

const WANTED = new Set<string>([...NAMES.numWaiting, ...NAMES.numRunning, ...NAMES.kvUsage]);

/** Calls `fn` for every sample line of a name in `wanted` with a finite value (labels skipped). */
export function forEachSample(text: string, wanted: ReadonlySet<string>, fn: (name: string, value: number) => void): void {
  for (const line of text.split('\n')) {
    if (line.length === 0 || line.startsWith('#')) continue;
    const nameEnd = line.search(/[{\s]/);
    if (nameEnd <= 0) continue;
    const name = line.slice(0, nameEnd);
    if (!wanted.has(name)) continue;
    const afterLabels = line[nameEnd] === '{' ? line.indexOf('}', nameEnd) + 1 : nameEnd;
    if (afterLabels <= 0) continue;
    const value = Number(line.slice(afterLabels).trim().split(/\s+/)[0]);
    if (Number.isFinite(value)) fn(name, value);
  }
}

export function parseLoad(text: string): UpstreamLoad {
  const sums = new Map<string, number>();
  const maxes = new Map<string, number>();
  forEachSample(text, WANTED, (name, value) => {
    sums.set(name, (sums.get(name) ?? 0) + value);
    maxes.set(name, Math.max(maxes.get(name) ?? -Infinity, value));
  });
  const first = (names: readonly string[], from: Map<string, number>): number | null => {
    for (const n of names) {
      const v = from.get(n);
      if (v !== undefined) return v;
    }
    return null;
  };
  const kv = first(NAMES.kvUsage, maxes);
  return { numWaiting: first(NAMES.numWaiting, sums), numRunning: first(NAMES.numRunning, sums), kvUsage: kv === null ? null : Math.min(1, Math.max(0, kv)) };
}
