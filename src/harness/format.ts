// Text rendering of a report: plain aligned tables, milliseconds rounded, Infinity shown as
// "> timeout" (a censored quantile), NaN as "-".
import type { ClassRow, SensitivityRow, Summary } from './report.ts';

export function fmt(v: number, digits = 1): string {
  if (Number.isNaN(v)) return '-';
  if (v === Infinity) return '>timeout';
  return v.toFixed(digits);
}

export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padStart(widths[i] ?? 0)).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export function renderReport(
  name: string,
  loopNote: string,
  s: Summary,
  classes: readonly ClassRow[],
  sens: readonly SensitivityRow[],
  validity: string,
): string {
  const out: string[] = [];
  out.push(`== ${name}  [${loopNote}]`);
  out.push(validity);
  out.push(
    `rows ${s.num_rows} (warm-up ${s.num_warmup}, cool-down ${s.num_cooldown} flagged, excluded); steady window ${fmt(s.window_s)} s`,
  );
  out.push(
    table(
      ['offered rps', 'throughput', `goodput@${s.slo_ms}ms`, 'SLO met', 'shed', '429', 'errors', 'timeouts'],
      [
        [
          fmt(s.offered_rate, 2),
          fmt(s.request_throughput, 2),
          fmt(s.request_goodput, 2),
          `${fmt(100 * s.slo_attainment)}%`,
          `${fmt(100 * s.shed_rate)}%`,
          `${fmt(100 * s.rate_429)}%`,
          String(s.num_http_errors + s.num_transport_errors),
          String(s.num_timeouts),
        ],
      ],
    ),
  );
  out.push('');
  out.push(
    table(
      ['ms', 'mean', 'p50', 'p95', 'p99'],
      (['ttft', 'tpot', 'itl', 'e2el'] as const).map((k) => [
        k.toUpperCase(),
        fmt(s[`mean_${k}_ms`]),
        fmt(s[`median_${k}_ms`]),
        fmt(s[`p95_${k}_ms`]),
        fmt(s[`p99_${k}_ms`]),
      ]),
    ),
  );
  if (classes.length > 1) {
    out.push('');
    out.push(
      table(
        ['class', 'arrivals', 'ok', 'shed', 'goodput', 'SLO met', 'TTFT p50', 'TTFT p95', 'TTFT p99', 'E2E p50', 'E2E p95', 'E2E p99'],
        classes.map((c) => [
          c.klass,
          String(c.num_arrivals),
          String(c.completed),
          String(c.num_shed),
          fmt(c.goodput, 2),
          `${fmt(100 * c.slo_attainment)}%`,
          fmt(c.ttft.median),
          fmt(c.ttft.p95),
          fmt(c.ttft.p99),
          fmt(c.e2el.median),
          fmt(c.e2el.p95),
          fmt(c.e2el.p99),
        ]),
      ),
    );
  }
  out.push('');
  out.push('SLO sensitivity (same rows):');
  out.push(table(['SLO ms', 'goodput rps', 'SLO met'], sens.map((r) => [String(r.slo_ms), fmt(r.goodput, 2), `${fmt(100 * r.slo_attainment)}%`])));
  out.push(`schedule_delay (s): p50 ${s.schedule_delay['median']?.toExponential(2)}  p99 ${s.schedule_delay['p99']?.toExponential(2)}  max ${s.schedule_delay['max']?.toExponential(2)}`);
  return out.join('\n');
}

/** JSON.stringify that keeps Infinity/NaN visible as strings instead of silently null. */
export function toJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'number' && !Number.isFinite(x) ? String(x) : x), 2);
}
