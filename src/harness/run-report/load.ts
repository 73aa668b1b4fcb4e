// One result folder read and summarised at an SLO: what `bench report` prints and what the run's
// HTML page draws, computed once here so the two never disagree.
import type { RequestRecord } from '../record.ts';
import type { ClassRow, ReportOptions, SensitivityRow, Summary } from '../report.ts';
import { byClass, sloSensitivity, summarize } from '../report.ts';
import { readMeta, readRecords } from '../store.ts';

/** The generator's own validation as meta.json records it (run.ts, GeneratorValidation). */
interface RecordedValidation {
  valid?: boolean;
  invalid_reason?: string | null;
  slip_p99_ms?: number;
  ks_intended?: { pValue?: number } | null;
}

export interface LoadedRun {
  readonly dir: string;
  readonly meta: Record<string, unknown>;
  readonly records: RequestRecord[];
  readonly opts: ReportOptions;
  readonly summary: Summary;
  readonly classes: ClassRow[];
  /** Goodput and attainment at the grid's SLOs (0.5x..2x the SLO unless given). */
  readonly sensitivity: SensitivityRow[];
  readonly generatorValidation: RecordedValidation | undefined;
  /** One line: the run is invalid and why, or the generator's slip p99 and KS p-value. */
  readonly validity: string;
  /** Which loop made the rows, in words (a closed loop is for calibration only). */
  readonly loopNote: string;
}

export async function loadRun(dir: string, sloMs: number, grid: readonly number[] | null = null): Promise<LoadedRun> {
  const meta = await readMeta(dir);
  const records = await readRecords(dir);
  const opts: ReportOptions = { sloMs, windowS: Number(meta['window_s']), timeoutMs: Number(meta['timeout_ms']) };
  const slos = grid ?? [0.5, 0.75, 1, 1.5, 2].map((k) => Math.round(k * sloMs));
  const gv = meta['generator_validation'] as RecordedValidation | undefined;
  const validity =
    gv?.valid === false
      ? `INVALID RUN: ${gv.invalid_reason ?? ''}`
      : `generator valid: slip p99 ${gv?.slip_p99_ms?.toFixed(3) ?? '-'} ms; KS p (intended gaps vs Exp(λ)) ${gv?.ks_intended?.pValue?.toFixed(3) ?? 'n/a'}`;
  return {
    dir,
    meta,
    records,
    opts,
    summary: summarize(records, opts),
    classes: byClass(records, opts),
    sensitivity: sloSensitivity(records, slos, opts.windowS),
    generatorValidation: gv,
    validity,
    loopNote: typeof meta['loop_note'] === 'string' ? meta['loop_note'] : 'loop unknown',
  };
}
