// The ablation ladder's plan: which rungs, which serve flags each one adds, and the order of the
// runs. Pure data, no I/O, so the order can be asserted on in a test and printed before a sweep.
//
// Order invariants (the reference's Week 2 and Week 5 ladders; DESIGN.md "Measurement"):
// - rate-major: every rung is run at one offered rate before the next rate starts, so no rung is
//   measured systematically on a hotter (or cooler) machine than another;
// - the rung order is rotated by one position per rate, so no rung is always first after a
//   restart or always last in a block;
// - within a rate, one block per seed; every block ends with a second run of the anchor rung
//   (rung 4, the last rung without admission), so |anchor rep 2 - anchor rep 1| measures what the
//   position inside a block costs (cross-block drift), in the data rather than assumed away;
// - every run gets its own fresh server, so no rung inherits another's warm prefix cache.

/** One configuration of the ladder: a rung adds exactly one thing to the rung before it. */
export interface Rung {
  /** Stable id, also the run folder name: '1-fifo' … '5-admission-95'. */
  readonly id: string;
  /** Human label for tables. */
  readonly label: string;
  /** What this rung isolates relative to the one before it. */
  readonly isolates: string;
  /** `headroom serve` flags that make this rung (the ladder adds runner, model, ports, keys). */
  readonly serveFlags: readonly string[];
  /** Admission guarantee (1 - alpha) for rung 5, else null. */
  readonly guarantee: number | null;
}

const NO_ADMISSION = ['--admission', 'off'];

/** Every rung the ladder knows, in ladder order (docs/ladder.md). */
export const RUNGS: readonly Rung[] = [
  { id: '1-fifo', label: '1 FIFO, no batching', isolates: 'the baseline', serveFlags: ['--scheduler', 'fifo', ...NO_ADMISSION], guarantee: null },
  { id: '2-static', label: '2 static batching (8)', isolates: 'batching at all', serveFlags: ['--scheduler', 'static', '--static-batch', '8', '--static-wait-ms', '50', '--kv', 'contiguous', ...NO_ADMISSION], guarantee: null },
  { id: '3-continuous', label: '3 continuous batching', isolates: 'iteration-level scheduling', serveFlags: ['--scheduler', 'continuous', '--kv', 'contiguous', ...NO_ADMISSION], guarantee: null },
  { id: '4-paged-prefix', label: '4 + paged KV + prefix cache', isolates: 'memory efficiency and prompt reuse', serveFlags: ['--scheduler', 'continuous', '--kv', 'paged', '--prefix-cache', 'on', ...NO_ADMISSION], guarantee: null },
  ...[0.8, 0.95, 0.99].map((g) => ({
    id: `5-admission-${Math.round(g * 100)}`,
    label: `5 + conformal admission (${Math.round(g * 100)}%)`,
    isolates: g === 0.8 ? 'tail-latency control under overload' : 'the same control, promised harder',
    serveFlags: ['--scheduler', 'continuous', '--kv', 'paged', '--prefix-cache', 'on', '--admission', 'conformal', '--admission-guarantee', String(g)],
    guarantee: g,
  })),
];

/** The rung run twice per block to measure drift. */
export const ANCHOR_RUNG_ID = '4-paged-prefix';

export function rungById(id: string): Rung {
  const r = RUNGS.find((x) => x.id === id);
  if (r === undefined) throw new Error(`expected a rung id (${RUNGS.map((x) => x.id).join(', ')}), got '${id}'`);
  return r;
}

/** One run of the sweep: a fresh server, a probe, one open-loop run. */
export interface PlannedRun {
  /** Position in the sweep, 0-based. */
  readonly index: number;
  /** Folder under the study, also the row key: `rate-<r>/seed-<s>/<rung>[-rep2]`. */
  readonly runId: string;
  readonly rungId: string;
  /** Offered rate, req/s. */
  readonly rate: number;
  readonly seed: number;
  /** 1, or 2 for the anchor's second run in its block. */
  readonly rep: number;
  /** Block number: one (rate, seed) pair, rate-major. */
  readonly block: number;
  /** Position inside the block, 0-based. */
  readonly position: number;
}

/** Rate as it appears in folder names: plain decimal, no exponent, no trailing zeros. */
export function rateLabel(rate: number): string {
  return String(Number(rate.toFixed(4)));
}

/**
 * The sweep order: rates ascending, then seeds, then the rungs rotated by the rate's index
 * (rate i starts with rung i mod n), then the anchor again if it is in the study.
 */
export function planRuns(rungIds: readonly string[], rates: readonly number[], seeds: readonly number[]): PlannedRun[] {
  const runs: PlannedRun[] = [];
  let block = 0;
  const sortedRates = [...rates].sort((a, b) => a - b);
  for (const [ri, rate] of sortedRates.entries()) {
    const rotated = rungIds.map((_, k) => rungIds[(k + ri) % rungIds.length]!);
    for (const seed of seeds) {
      const order = rotated.map((id) => ({ id, rep: 1 }));
      if (rungIds.includes(ANCHOR_RUNG_ID)) order.push({ id: ANCHOR_RUNG_ID, rep: 2 });
      for (const [position, { id, rep }] of order.entries()) {
        runs.push({
          index: runs.length,
          runId: `rate-${rateLabel(rate)}/seed-${seed}/${id}${rep === 2 ? '-rep2' : ''}`,
          rungId: id,
          rate,
          seed,
          rep,
          block,
          position,
        });
      }
      block++;
    }
  }
  return runs;
}

/** Offered rates from a capacity and multipliers of it, rounded to 2 significant digits. */
export function rateGrid(capacityRps: number, multipliers: readonly number[]): number[] {
  if (!(capacityRps > 0)) throw new Error(`rate grid: expected a capacity > 0 req/s, got ${capacityRps}`);
  const rates = multipliers.map((m) => Number((capacityRps * m).toPrecision(2)));
  return [...new Set(rates)].sort((a, b) => a - b);
}
