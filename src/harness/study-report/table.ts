// A report table as data (so the same table renders as Markdown for docs/ and as HTML for the
// study page, and the embed script can regenerate exactly one), plus the number formats every
// table uses. Infinity is a censored quantile (above the client timeout), NaN "no data".

export interface Table {
  /** Stable id: the file name under report/tables/ and the embed marker's key. */
  readonly id: string;
  readonly title: string;
  readonly headers: readonly string[];
  readonly rows: ReadonlyArray<readonly string[]>;
  /** Paragraphs under the table: definitions, and whether there are enough requests for a p99. */
  readonly notes: readonly string[];
}

export interface Agg {
  mean: number;
  min: number;
  max: number;
  n: number;
}

/** Mean, min and max over seeds; NaN entries (no data) are left out, one Infinity makes the mean Infinity. */
export function agg(values: readonly number[]): Agg {
  const v = values.filter((x) => !Number.isNaN(x));
  if (v.length === 0) return { mean: NaN, min: NaN, max: NaN, n: 0 };
  const mean = v.some((x) => x === Infinity) ? Infinity : v.reduce((a, b) => a + b, 0) / v.length;
  return { mean, min: Math.min(...v), max: Math.max(...v), n: v.length };
}

/** A number with `digits` decimals; '-' for NaN, '>timeout' for Infinity. */
export function fmtNum(v: number, digits: number): string {
  if (Number.isNaN(v)) return '-';
  if (v === Infinity) return '>timeout';
  return v.toFixed(digits);
}

/** "mean [min–max]" (just the mean when there is one value or no spread at this precision). */
export function fmtAgg(a: Agg, digits: number, scale = 1): string {
  const m = fmtNum(a.mean * scale, digits);
  if (a.n <= 1) return m;
  const lo = fmtNum(a.min * scale, digits);
  const hi = fmtNum(a.max * scale, digits);
  return lo === hi ? m : `${m} [${lo}–${hi}]`;
}

/** A share as "mean% [min–max%]". */
export const fmtPct = (a: Agg): string => (Number.isNaN(a.mean) ? '-' : fmtAgg(a, 0, 100).replace(/^([^ ]+)( \[(.*)\])?$/, (_m, m: string, _r: string | undefined, range: string | undefined) => (range === undefined ? `${m}%` : `${m}% [${range}%]`)));

const cell = (s: string): string => s.replaceAll('|', '\\|');

export function tableMarkdown(t: Table): string {
  const lines = [
    `| ${t.headers.map(cell).join(' | ')} |`,
    `|${t.headers.map(() => '---').join('|')}|`,
    ...t.rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ];
  return [`**${t.title}**`, '', ...lines, ...t.notes.flatMap((n) => ['', n])].join('\n') + '\n';
}

const esc = (s: string): string => s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

export function tableHtml(t: Table): string {
  const head = `<tr>${t.headers.map((h) => `<th>${esc(h)}</th>`).join('')}</tr>`;
  const body = t.rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('\n');
  return `<section id="${esc(t.id)}"><h3>${esc(t.title)}</h3>\n<table>\n${head}\n${body}\n</table>\n${t.notes.map((n) => `<p class="note">${esc(n)}</p>`).join('\n')}</section>\n`;
}
