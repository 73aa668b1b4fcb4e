// A benchmark result folder (`headroom bench run`: records.parquet + meta.json, src/harness/store.ts)
// as a dashboard run: the client's view, one row per request, times from the run's start. Arrivals
// are the intended ones (latency is measured from them); a shed request (503/429) is a refusal at
// the moment its answer came; waiting means no token yet, running means streaming. There are no
// engine steps or admission bounds in a result, so those charts stay empty.
//
// DuckDB (which reads the Parquet) loads only when a result is first opened. The reading is the
// harness's (src/harness/store.ts), handed in by the process that serves the dashboard (app.ts):
// obs/ sits under the API and never imports the harness, a tool above it (docs/architecture.md,
// "Layers"); what it reads of a row is declared here, and the store's rows have that shape.

import { access } from 'node:fs/promises';
import { join } from 'node:path';
import type { DashboardData, TimelineRequest } from './dashboard-data.ts';
import { timelineData } from './dashboard-data.ts';

/** What the dashboard reads of one request row of a result (the harness's RequestRecord). */
export interface BenchRow {
  readonly request_id: number;
  readonly outcome: string;
  readonly intended_ms: number;
  readonly headers_ms: number | null;
  readonly ttft_ms: number | null;
  readonly e2e_ms: number | null;
  readonly end_ms: number;
}

/** How a result folder is read: records.parquet and meta.json (harness/store.ts). */
export interface BenchStore {
  readRecords(dir: string): Promise<readonly BenchRow[]>;
  readMeta(dir: string): Promise<Record<string, unknown>>;
}

const RECORDS_FILE = 'records.parquet';

export async function isBenchResult(dir: string): Promise<boolean> {
  return access(join(dir, RECORDS_FILE)).then(
    () => true,
    () => false,
  );
}

export async function benchData(dir: string, name: string, store: BenchStore): Promise<DashboardData> {
  const records = await store.readRecords(dir);
  const meta = await store.readMeta(dir).catch((): Record<string, unknown> => ({}));
  const config = (meta['config'] ?? {}) as Record<string, unknown>;
  const admitted: TimelineRequest[] = [];
  const refusedAtMs: number[] = [];
  for (const r of records) {
    if (r.outcome === 'shed') {
      refusedAtMs.push(r.headers_ms ?? r.end_ms);
      continue;
    }
    const firstToken = r.ttft_ms === null ? null : r.intended_ms + r.ttft_ms;
    admitted.push({ id: String(r.request_id), arrivalMs: r.intended_ms, startMs: firstToken, finishMs: r.end_ms, ttftMs: r.ttft_ms, e2eMs: r.e2e_ms ?? (r.outcome === 'ok' ? null : r.end_ms - r.intended_ms), outcome: r.outcome === 'ok' ? 'stop' : r.outcome === 'timeout' ? 'abort' : 'error' });
  }
  const str = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : '?');
  return timelineData({
    title: name,
    sloMs: serverSloMs(meta),
    facts: { source: 'benchmark result', started: str(meta['started_at']), loop: str(config['loop']), rate: `${str(config['rate'])} req/s`, workload: str(config['workload']), model: str(config['model']) },
    admitted,
    refusedAtMs,
    steps: [],
    decisions: [],
    originMs: 0,
  });
}

/** The target server's --slo-ms as its /stats reported it before the run, or the SLO header the load sent. */
function serverSloMs(meta: Record<string, unknown>): number | null {
  const stats = meta['target_stats_before'] as { config?: { options?: Record<string, { value?: unknown }> } } | undefined;
  const fromServer = Number(stats?.config?.options?.['slo-ms']?.value);
  if (Number.isFinite(fromServer) && fromServer > 0) return fromServer;
  const header = Number((meta['config'] as Record<string, unknown> | undefined)?.['sloHeaderMs']);
  return Number.isFinite(header) && header > 0 ? header : null;
}
