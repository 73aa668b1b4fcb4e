// The Prometheus registry of one Headroom process: every metric it exports, under Headroom's own
// names (`headroom_*`) and again under the vLLM names that llm-d / Gateway API Inference Extension
// endpoint pickers and existing vLLM dashboards read (`vllm:*`, labelled `model_name`).
//
// Three ways a value gets here, each the cheapest for its kind:
//   - events (histograms, outcome and refusal counters): observed when they happen, by the step
//     observer (engine side) or the API (admission, refusal, finish);
//   - state (queue depth, batch, KV): gauges read from `stats()` when Prometheus scrapes;
//   - engine counters that already exist (preemptions, copy-on-write, prefix-cache tokens): read on
//     scrape and added as the difference since the last scrape, so the hot path pays nothing.
// One registry per instance (never prom-client's global one), so tests can run several servers.

import type { Counter as CounterT, Gauge as GaugeT, Histogram as HistogramT } from 'prom-client';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { EngineStats } from '../engine/engine.ts';
import type { FinishReason } from '../engine/outputs.ts';
import type { RefusalReason } from '../backend/refusal.ts';
import { REFUSAL_REASONS } from '../backend/refusal.ts';
import type { StepKind } from '../engine/step-record.ts';
import type { FlowControl } from '../flow/flow-control.ts';
import { FLOW_DECISIONS } from '../flow/flow-control.ts';
import { admissionBuckets, sloBuckets, stepBuckets, tokenLatencyBuckets } from './buckets.ts';

// Refusal reasons come from the one vocabulary (backend/refusal.ts); all exist at 0 from the start,
// so rate() and dashboards see them.
export const OUTCOMES: readonly FinishReason[] = ['stop', 'length', 'abort', 'error'];
/**
 * How an HTTP request ended, the `outcome` label of headroom_api_requests_total. The API decides
 * which (api/request-log.ts, whose log line says the same word); the labels are named here, under
 * the API, so the metrics never import it.
 */
export type ApiOutcome = 'ok' | 'refused' | 'error' | 'aborted' | 'timeout';
export const API_OUTCOMES: readonly ApiOutcome[] = ['ok', 'refused', 'error', 'aborted', 'timeout'];
const STEP_KINDS: readonly StepKind[] = ['prefill', 'decode', 'mixed'];

export interface MetricsOptions {
  /** The server's default SLO: request-latency buckets are dense around it (see buckets.ts). */
  readonly sloMs: number;
  /** `model_name` label on the vLLM-compatible series. */
  readonly modelName: string;
  /** Engine state, read at scrape time (absent in gateway mode: no engine gauges). */
  readonly stats?: () => EngineStats;
  /** Node process metrics (CPU, memory, event-loop lag); default true. */
  readonly processMetrics?: boolean;
  /** The tenant label's values (the API keys' tenants); default `default` alone. Others count as `other`. */
  readonly tenants?: readonly string[];
  /** Flow control: its decisions are counted by band, tenant and reason, its state read on scrape. */
  readonly flow?: FlowControl;
}

/** The tenant label of a tenant outside the configured set (cannot happen with keys from auth.ts; bounds the label anyway). */
const OTHER_TENANT = 'other';

/** One latency, observed under both names at once. */
export class LatencyPair {
  readonly #own: HistogramT;
  readonly #vllm: readonly { observe(v: number): void }[];

  constructor(own: HistogramT, vllm: readonly { observe(v: number): void }[]) {
    this.#own = own;
    this.#vllm = vllm;
  }

  observe(seconds: number): void {
    this.#own.observe(seconds);
    for (const h of this.#vllm) h.observe(seconds);
  }
}

export class Metrics {
  readonly registry = new Registry();
  /** Arrival → first token. */
  readonly ttft: LatencyPair;
  /** Gap between consecutive tokens of one request (per token). */
  readonly itl: LatencyPair;
  /** Arrival → finish. */
  readonly e2e: LatencyPair;
  /** Arrival → first admission into the running set. */
  readonly queueTime: LatencyPair;
  readonly stepSeconds: HistogramT<'kind'>;
  readonly admissionSeconds: HistogramT;
  readonly #outcomes: CounterT<'outcome'>;
  readonly #vllmSuccess: CounterT<'model_name' | 'finished_reason'>;
  readonly #refusals: CounterT<'reason'>;
  readonly #promptTokens: { inc(n: number): void }[];
  readonly #generationTokens: { inc(n: number): void }[];
  readonly #model: string;
  readonly #tenants: ReadonlySet<string>;
  readonly #apiRequests: CounterT<'tenant' | 'outcome'>;
  /** vLLM's per-request and per-iteration series (names as vLLM documents them). */
  readonly #requestPromptTokens: { observe(v: number): void };
  readonly #requestGenerationTokens: { observe(v: number): void };
  readonly #prefillTime: { observe(v: number): void };
  readonly #decodeTime: { observe(v: number): void };
  readonly #inferenceTime: { observe(v: number): void };
  readonly #iterationTokens: { observe(v: number): void };
  readonly #bypassed: CounterT<'tenant'>;
  readonly #authFailures: CounterT;
  readonly #recorderWriteErrors: CounterT;

  constructor(opts: MetricsOptions) {
    const reg = this.registry;
    const model = opts.modelName;
    this.#model = model;
    const vllmLabels = ['model_name'] as const;
    const sloB = sloBuckets(opts.sloMs);
    const tokB = tokenLatencyBuckets(opts.sloMs);
    const hist = (name: string, help: string, buckets: number[]): HistogramT => new Histogram({ name, help, buckets, registers: [reg] });
    const vhist = (name: string, help: string, buckets: number[]) =>
      new Histogram({ name, help, buckets, labelNames: vllmLabels, registers: [reg] }).labels({ model_name: model });

    this.ttft = new LatencyPair(hist('headroom_time_to_first_token_seconds', 'Arrival to first token, seconds.', sloB), [
      vhist('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', sloB),
    ]);
    this.itl = new LatencyPair(hist('headroom_inter_token_latency_seconds', 'Time between consecutive tokens of a request, seconds.', tokB), [
      vhist('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', tokB),
      vhist('vllm:time_per_output_token_seconds', 'Histogram of time per output token in seconds (per token, as vLLM v0 reported it).', tokB),
    ]);
    this.e2e = new LatencyPair(hist('headroom_e2e_request_latency_seconds', 'Arrival to finish, seconds.', sloB), [
      vhist('vllm:e2e_request_latency_seconds', 'Histogram of end to end request latency in seconds.', sloB),
    ]);
    this.queueTime = new LatencyPair(hist('headroom_request_queue_time_seconds', 'Arrival to first admission into the running batch, seconds.', sloB), [
      vhist('vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', sloB),
    ]);
    this.stepSeconds = new Histogram({ name: 'headroom_engine_step_seconds', help: 'Wall time of one engine step (schedule, execute, apply), seconds.', labelNames: ['kind'], buckets: stepBuckets(), registers: [reg] });
    for (const kind of STEP_KINDS) this.stepSeconds.zero({ kind });
    this.admissionSeconds = hist('headroom_admission_decision_seconds', 'Time the API spends deciding to admit or refuse a request, seconds.', admissionBuckets());

    this.#outcomes = new Counter({ name: 'headroom_requests_total', help: 'Requests that finished, by outcome (finish reason).', labelNames: ['outcome'], registers: [reg] });
    this.#vllmSuccess = new Counter({ name: 'vllm:request_success_total', help: 'Count of finished requests, by finish reason.', labelNames: ['model_name', 'finished_reason'], registers: [reg] });
    for (const o of OUTCOMES) {
      this.#outcomes.inc({ outcome: o }, 0);
      this.#vllmSuccess.inc({ model_name: model, finished_reason: o }, 0);
    }
    this.#refusals = new Counter({ name: 'headroom_refusals_total', help: 'Requests refused before running, by reason.', labelNames: ['reason'], registers: [reg] });
    for (const r of REFUSAL_REASONS) this.#refusals.inc({ reason: r }, 0);

    const tokenCounters = (own: string, vllm: string, what: string): { inc(n: number): void }[] => [
      new Counter({ name: own, help: `${what} tokens processed.`, registers: [reg] }),
      new Counter({ name: vllm, help: `Number of ${what.toLowerCase()} tokens processed.`, labelNames: vllmLabels, registers: [reg] }).labels({ model_name: model }),
    ];
    this.#promptTokens = tokenCounters('headroom_prompt_tokens_total', 'vllm:prompt_tokens_total', 'Prompt');
    this.#generationTokens = tokenCounters('headroom_generation_tokens_total', 'vllm:generation_tokens_total', 'Generation');
    // vLLM's buckets for token counts: 1, 2, 5 × powers of ten up to the context.
    const countB = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
    this.#requestPromptTokens = vhist('vllm:request_prompt_tokens', 'Number of prefill tokens processed.', countB);
    this.#requestGenerationTokens = vhist('vllm:request_generation_tokens', 'Number of generation tokens processed.', countB);
    this.#prefillTime = vhist('vllm:request_prefill_time_seconds', 'Histogram of time spent in PREFILL phase for request.', sloB);
    this.#decodeTime = vhist('vllm:request_decode_time_seconds', 'Histogram of time spent in DECODE phase for request.', sloB);
    this.#inferenceTime = vhist('vllm:request_inference_time_seconds', 'Histogram of time spent in RUNNING phase for request.', sloB);
    this.#iterationTokens = vhist('vllm:iteration_tokens_total', 'Histogram of number of tokens per engine_step.', [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]);

    // API requests by tenant: the tenant label is a closed set (the configured keys' tenants).
    this.#tenants = new Set(opts.tenants ?? ['default']);
    this.#apiRequests = new Counter({ name: 'headroom_api_requests_total', help: 'HTTP requests served, by tenant and outcome (ok, refused, error, aborted, timeout).', labelNames: ['tenant', 'outcome'], registers: [reg] });
    this.#bypassed = new Counter({ name: 'headroom_admission_bypassed_total', help: 'Requests an operator key sent past admission control (x-headroom-bypass-admission), by tenant.', labelNames: ['tenant'], registers: [reg] });
    this.#authFailures = new Counter({ name: 'headroom_auth_failures_total', help: 'Requests refused with 401 (no API key or a wrong one).', registers: [reg] });
    this.#recorderWriteErrors = new Counter({ name: 'headroom_recorder_write_errors_total', help: 'Flight-recorder (--record) write errors: disk full, I/O error, no permission. The first stops the recording; serving goes on.', registers: [reg] });
    for (const tenant of this.#tenants) {
      for (const outcome of API_OUTCOMES) this.#apiRequests.inc({ tenant, outcome }, 0);
      this.#bypassed.inc({ tenant }, 0);
    }

    if (opts.flow !== undefined) this.#registerFlow(opts.flow);
    if (opts.stats !== undefined) this.#registerState(opts.stats, opts.sloMs);
    if (opts.processMetrics ?? true) collectDefaultMetrics({ register: reg });
  }

  /** A request ended (once per request). */
  finished(reason: FinishReason): void {
    this.#outcomes.inc({ outcome: reason });
    this.#vllmSuccess.inc({ model_name: this.#model, finished_reason: reason });
  }

  refused(reason: RefusalReason): void {
    this.#refusals.inc({ reason });
  }

  /** An HTTP request is over (once per request, from its log line). */
  apiRequest(tenant: string, outcome: ApiOutcome): void {
    this.#apiRequests.inc({ tenant: this.#tenantLabel(tenant), outcome });
  }

  admissionBypassed(tenant: string): void {
    this.#bypassed.inc({ tenant: this.#tenantLabel(tenant) });
  }

  authFailed(): void {
    this.#authFailures.inc();
  }

  /** The flight recorder stopped on a write error. */
  recorderWriteFailed(): void {
    this.#recorderWriteErrors.inc();
  }

  #tenantLabel(tenant: string): string {
    return this.#tenants.has(tenant) ? tenant : OTHER_TENANT;
  }

  /** A request finished: vLLM's per-request histograms (prefill = scheduled → first token, decode = first token → finish). */
  requestFinished(t: { scheduledMs: number | null; firstTokenMs: number | null; finishedMs: number | null; numPromptTokens: number; numOutputTokens: number }): void {
    this.#requestPromptTokens.observe(t.numPromptTokens);
    this.#requestGenerationTokens.observe(t.numOutputTokens);
    if (t.scheduledMs !== null && t.firstTokenMs !== null) this.#prefillTime.observe((t.firstTokenMs - t.scheduledMs) / 1000);
    if (t.firstTokenMs !== null && t.finishedMs !== null) this.#decodeTime.observe((t.finishedMs - t.firstTokenMs) / 1000);
    if (t.scheduledMs !== null && t.finishedMs !== null) this.#inferenceTime.observe((t.finishedMs - t.scheduledMs) / 1000);
  }

  /** One engine step computed this many tokens (prompt and decode rows). */
  iteration(numTokens: number): void {
    this.#iterationTokens.observe(numTokens);
  }

  promptTokens(n: number): void {
    for (const c of this.#promptTokens) c.inc(n);
  }

  generationTokens(n: number): void {
    for (const c of this.#generationTokens) c.inc(n);
  }

  /** The exposition text Prometheus scrapes. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Every series name a PromQL query may use: counters and gauges as named, histograms with _bucket/_sum/_count. */
  seriesNames(): Set<string> {
    const out = new Set<string>();
    for (const m of this.registry.getMetricsAsArray()) {
      const { name, type } = m as unknown as { name: string; type: string };
      if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) out.add(name + s);
      else out.add(name);
    }
    return out;
  }

  /** Flow-control decisions (band × tenant × reason, all at 0 from the start) and its state on scrape. */
  #registerFlow(flow: FlowControl): void {
    const reg = this.registry;
    const decisions = new Counter({ name: 'headroom_flow_decisions_total', help: 'Flow-control decisions, by priority band, tenant and reason (admitted, admitted_after_wait, queue_full, queue_ttl, too_large, client_left).', labelNames: ['band', 'tenant', 'reason'], registers: [reg] });
    for (let band = 0; band < flow.numBands; band++) {
      for (const tenant of [...this.#tenants, OTHER_TENANT]) for (const reason of FLOW_DECISIONS) decisions.inc({ band: String(band), tenant, reason }, 0);
    }
    flow.onDecision((band, tenant, reason) => decisions.inc({ band: String(band), tenant: this.#tenantLabel(tenant), reason }));
    const gauge = (name: string, help: string, read: () => number): void =>
      void new Gauge({ name, help, registers: [reg], collect(this: GaugeT<string>) { this.set(read()); } });
    gauge('headroom_flow_in_flight_requests', 'Requests holding a flow-control slot.', () => flow.state().inFlight.requests);
    gauge('headroom_flow_in_flight_input_tokens', 'Prompt tokens of the requests holding a flow-control slot.', () => flow.state().inFlight.inputTokens);
    gauge('headroom_flow_in_flight_total_tokens', 'Prompt plus max_tokens × n of the requests holding a flow-control slot.', () => flow.state().inFlight.totalTokens);
    gauge('headroom_flow_drain_per_second', 'Flow-control slots freed per second lately (what Retry-After is estimated from).', () => flow.state().drainPerS);
    new Gauge({
      name: 'headroom_flow_queued',
      help: 'Requests waiting in the flow-control queue, by priority band.',
      labelNames: ['band'],
      registers: [reg],
      collect(this: GaugeT<string>) {
        flow.state().queued.forEach((n, band) => this.set({ band: String(band) }, n));
      },
    });
    if (flow.state().shared !== undefined) this.#registerSharedFlow(flow);
  }

  /** Shared flow control (several replicas, one Redis): which mode, and how often it fell back. */
  #registerSharedFlow(flow: FlowControl): void {
    const reg = this.registry;
    new Gauge({
      name: 'headroom_flow_shared_state',
      help: 'Where the flow-control caps are counted: mode="redis" 1 while shared across replicas, mode="local" 1 while Redis is unreachable and this replica serves its local share.',
      labelNames: ['mode'],
      registers: [reg],
      collect(this: GaugeT<string>) {
        const redis = flow.state().shared?.mode === 'redis';
        this.set({ mode: 'redis' }, redis ? 1 : 0);
        this.set({ mode: 'local' }, redis ? 0 : 1);
      },
    });
    let last = 0;
    new Counter({
      name: 'headroom_flow_shared_fallbacks_total',
      help: 'Times this replica fell back from the shared (Redis) caps to its local share.',
      registers: [reg],
      collect(this: CounterT<string>) {
        const n = flow.state().shared?.fallbacks ?? 0;
        if (n > last) this.inc(n - last);
        last = n;
      },
    });
    new Gauge({
      name: 'headroom_flow_shared_replicas',
      help: 'Gateway replicas live in the shared flow-control state at the last sync.',
      registers: [reg],
      collect(this: GaugeT<string>) {
        this.set(flow.state().shared?.replicasSeen ?? 0);
      },
    });
  }

  /** Gauges and engine-derived counters, all read from one `stats()` call per collector at scrape time. */
  #registerState(stats: () => EngineStats, sloMs: number): void {
    const reg = this.registry;
    const model = this.#model;
    const gauge = (name: string, help: string, read: (s: EngineStats) => number, labels?: { model_name: string }): GaugeT =>
      new Gauge({
        name,
        help,
        labelNames: labels === undefined ? [] : ['model_name'],
        registers: [reg],
        collect(this: GaugeT<string>) {
          const v = read(stats());
          if (labels === undefined) this.set(v);
          else this.set(labels, v);
        },
      });
    const vl = { model_name: model };
    gauge('headroom_requests_waiting', 'Requests in the wait queue (queue depth).', (s) => s.scheduler.numWaiting);
    gauge('headroom_requests_running', 'Requests in the running batch.', (s) => s.scheduler.numRunning);
    gauge('headroom_kv_blocks', 'KV blocks in the pool.', (s) => s.scheduler.kv.numBlocks);
    gauge('headroom_kv_free_blocks', 'Free KV blocks.', (s) => s.scheduler.kv.numFreeBlocks);
    gauge('headroom_kv_usage_ratio', 'Fraction of KV blocks in use, 0..1.', (s) => s.scheduler.kv.usage);
    gauge('headroom_kv_fragmentation_ratio', 'KV fragmentation, 0..1 (paged: partially filled tail waste; contiguous: unusable free space).', (s) => s.scheduler.kv.fragmentation);
    gauge('headroom_draining', '1 while the server drains (refuses new requests).', (s) => (s.draining ? 1 : 0));
    gauge('headroom_slo_seconds', 'The default latency budget per request (the SLO the buckets are built around).', () => sloMs / 1000);
    gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', (s) => s.scheduler.numWaiting, vl);
    gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', (s) => s.scheduler.numRunning, vl);
    gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', (s) => s.scheduler.kv.usage, vl);
    // vLLM's info gauge: the cache's configuration as labels, value 1 (routers read block_size and num_gpu_blocks).
    new Gauge({
      name: 'vllm:cache_config_info',
      help: 'Information of the LLMEngine CacheConfig',
      labelNames: ['block_size', 'num_gpu_blocks', 'num_cpu_blocks', 'enable_prefix_caching', 'cache_dtype', 'model_name'],
      registers: [reg],
      collect(this: GaugeT<string>) {
        const kv = stats().scheduler.kv;
        this.reset();
        this.set({ block_size: String(kv.blockSize), num_gpu_blocks: String(kv.numBlocks), num_cpu_blocks: '0', enable_prefix_caching: String(kv.prefixCache !== null), cache_dtype: 'auto', model_name: model }, 1);
      },
    });

    // Engine counters are monotonic; add what they grew by since the last scrape.
    const derived = (name: string, help: string, read: (s: EngineStats) => number, labels?: { model_name: string }): void => {
      let last = 0;
      new Counter({
        name,
        help,
        labelNames: labels === undefined ? [] : ['model_name'],
        registers: [reg],
        collect(this: CounterT<string>) {
          const v = read(stats());
          const delta = v >= last ? v - last : v; // a smaller value means the source restarted
          last = v;
          if (labels === undefined) this.inc(delta);
          else this.inc(labels, delta);
        },
      });
    };
    const queryTokens = (s: EngineStats): number => s.scheduler.kv.prefixCache?.queryTokens ?? 0;
    const hitTokens = (s: EngineStats): number => s.scheduler.kv.prefixCache?.hitTokens ?? 0;
    derived('headroom_preemptions_total', 'Requests preempted (recompute) to free KV.', (s) => s.scheduler.numPreemptions);
    derived('headroom_kv_copy_on_write_total', 'KV blocks copied before appending to a shared, partially filled block.', (s) => s.scheduler.kv.numCopyOnWrite);
    derived('headroom_prefix_cache_query_tokens_total', 'Prompt tokens looked up in the prefix cache.', queryTokens);
    derived('headroom_prefix_cache_hit_tokens_total', 'Prompt tokens found in the prefix cache.', hitTokens);
    derived('vllm:num_preemptions_total', 'Cumulative number of preemptions from the engine.', (s) => s.scheduler.numPreemptions, vl);
    derived('vllm:prefix_cache_queries_total', 'Prefix cache queries, in terms of number of queried tokens.', queryTokens, vl);
    derived('vllm:prefix_cache_hits_total', 'Prefix cache hits, in terms of number of cached tokens.', hitTokens, vl);
  }
}
