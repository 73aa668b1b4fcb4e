// The soak's verdict is a trend, not a level: a leak shows as resident memory (or JS heap) that keeps
// rising at a steady rate under a steady load, and as an idle KV baseline (free blocks with nothing
// running) that falls. So: a least-squares slope per 10 minutes over every sample after warm-up,
// and the mean of the first window against the mean of the last (5 minutes each, or a quarter of a
// shorter run), which a slope fitted to a one-off step would misstate.

export interface Sample {
  readonly tS: number;
  readonly rssMiB: number;
  readonly heapUsedMiB: number | null;
  readonly lagP99Ms: number | null;
  readonly lagMaxMs: number | null;
  readonly running: number | null;
  readonly waiting: number | null;
  readonly freeKvBlocks: number | null;
  readonly cachedNodes: number | null;
  readonly flowInFlight: number | null;
  readonly clientInFlight: number;
  readonly sent: number;
  readonly completed: number;
  readonly aborted: number;
  readonly refused: number;
  readonly errors: number;
  /** Free KV blocks read in a quiet window with nothing running or waiting; null in other samples. */
  readonly idleFreeKvBlocks: number | null;
}

export const CSV_COLUMNS: readonly (keyof Sample)[] = ['tS', 'rssMiB', 'heapUsedMiB', 'lagP99Ms', 'lagMaxMs', 'running', 'waiting', 'freeKvBlocks', 'cachedNodes', 'flowInFlight', 'clientInFlight', 'sent', 'completed', 'aborted', 'refused', 'errors', 'idleFreeKvBlocks'];

export function toCsv(samples: readonly Sample[]): string {
  const rows = samples.map((s) => CSV_COLUMNS.map((c) => (s[c] === null ? '' : typeof s[c] === 'number' ? String(Math.round((s[c]) * 1000) / 1000) : String(s[c]))).join(','));
  return `${CSV_COLUMNS.join(',')}\n${rows.join('\n')}\n`;
}

export interface Trend {
  /** Least-squares slope, per 10 minutes. */
  readonly slopePer10Min: number | null;
  readonly firstWindowMean: number | null;
  readonly lastWindowMean: number | null;
  readonly max: number | null;
}

/** The trend of `field` over samples from `fromS` on, with windows of `windowS` at each end. */
export function trend(samples: readonly Sample[], field: keyof Sample, fromS: number, windowS: number): Trend {
  const pts = samples.filter((s) => s.tS >= fromS && typeof s[field] === 'number').map((s) => [s.tS, s[field] as number] as const);
  if (pts.length === 0) return { slopePer10Min: null, firstWindowMean: null, lastWindowMean: null, max: null };
  const endS = pts.at(-1)![0];
  const mean = (xs: readonly number[]): number | null => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length);
  return {
    slopePer10Min: pts.length < 2 ? null : slope(pts) * 600,
    firstWindowMean: mean(pts.filter(([t]) => t < fromS + windowS).map(([, v]) => v)),
    lastWindowMean: mean(pts.filter(([t]) => t > endS - windowS).map(([, v]) => v)),
    max: Math.max(...pts.map(([, v]) => v)),
  };
}

function slope(pts: readonly (readonly [number, number])[]): number {
  const n = pts.length;
  const mx = pts.reduce((a, [x]) => a + x, 0) / n;
  const my = pts.reduce((a, [, y]) => a + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const [x, y] of pts) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
  }
  return sxx === 0 ? 0 : sxy / sxx;
}

/** The windows a run of `durationS` is judged on: 5 minutes, or a quarter of a shorter run. */
export function windowFor(durationS: number): number {
  return Math.min(300, durationS / 4);
}
