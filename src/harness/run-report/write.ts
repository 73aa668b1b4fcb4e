// `headroom bench run --report`: one self-contained HTML page for a single run — its figures
// (latency CDFs, goodput over SLOs, rates, latency and tokens over the run) inlined as SVG, then the
// same text report `bench report` prints. No script and nothing fetched: the file opens anywhere.
// Invariant: the page is a function of the result folder and the SLO (no clock, no machine path),
// so writing it twice gives the same bytes.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { renderReport } from '../format.ts';
import { escapeHtml, PAGE_CSS } from '../study-report/write.ts';
import type { RunFigure } from './figures.ts';
import { runFigures } from './figures.ts';
import type { LoadedRun } from './load.ts';
import { loadRun } from './load.ts';

export const RUN_REPORT_FILE = 'report.html';

/** The run's settings in words, from meta.json's recorded config. */
function about(run: LoadedRun): string[] {
  const c = (run.meta['config'] ?? {}) as Record<string, unknown>;
  const load = c['loop'] === 'closed' ? `${String(c['concurrency'])} closed-loop workers` : `${String(c['arrival'])} arrivals at ${String(c['rate'])} req/s`;
  return [
    `Target ${String(c['url'])}${String(c['path'])}, model ${String(c['model'])}; ${run.loopNote}.`,
    `Workload ${String(c['workload'])}, ${load}, seed ${String(c['seed'])}; ${String(c['durationS'])} s of arrivals (warm-up ${String(c['warmupS'])} s, cool-down ${String(c['cooldownS'])} s not counted); client timeout ${String(c['timeoutS'])} s.`,
    `E2E SLO ${run.opts.sloMs} ms; ${run.summary.num_arrivals} steady arrivals of ${run.records.length} rows; started ${String(run.meta['started_at'])}.`,
  ];
}

const figureHtml = (f: RunFigure): string => `<figure id="fig-${f.id}">${f.svg}<figcaption>${escapeHtml(f.title)}</figcaption></figure>`;

/** The page for a loaded run; `name` is how the page names the run (the folder's name). */
export async function runReportHtml(run: LoadedRun, name: string): Promise<string> {
  const c = (run.meta['config'] ?? {}) as Record<string, unknown>;
  const figures = await runFigures({
    records: run.records,
    summary: run.summary,
    sloMs: run.opts.sloMs,
    windowS: run.opts.windowS,
    timeoutMs: run.opts.timeoutMs,
    durationS: Number(c['durationS']),
    warmupS: Number(c['warmupS'] ?? 0),
    cooldownS: Number(c['cooldownS'] ?? 0),
  });
  const title = `Bench run ${name}`;
  const text = renderReport(name, run.loopNote, run.summary, run.classes, run.sensitivity, run.validity);
  const invalid = run.generatorValidation?.valid === false;
  return [
    '<!doctype html>', '<html lang="en"><head><meta charset="utf-8">', `<title>${escapeHtml(title)}</title>`, `<style>${PAGE_CSS}</style></head><body>`,
    `<h1>${escapeHtml(title)}</h1>`,
    `<p>Written by <code>headroom bench run --report</code> from the folder's records.parquet and meta.json.</p>`,
    `<ul>${about(run).map((l) => `<li>${escapeHtml(l)}</li>`).join('')}</ul>`,
    invalid ? `<p><strong>${escapeHtml(run.validity)}</strong></p>` : `<p class="note">${escapeHtml(run.validity)}</p>`,
    ...figures.map(figureHtml),
    `<section id="summary"><h3>Summary (as <code>headroom bench report</code> prints it)</h3><pre>${escapeHtml(text)}</pre></section>`,
    '</body></html>',
  ].join('\n') + '\n';
}

/** Writes the page for the result folder `dir` at the E2E SLO `sloMs` to `file` (default DIR/report.html); returns its path. */
export async function writeRunReport(dir: string, sloMs: number, file: string = path.join(dir, RUN_REPORT_FILE)): Promise<string> {
  const run = await loadRun(dir, sloMs);
  const html = await runReportHtml(run, path.basename(path.resolve(dir)));
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, html);
  return file;
}
