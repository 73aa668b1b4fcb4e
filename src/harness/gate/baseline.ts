// The committed baseline the CI load gate compares against (results/gate/baseline.json): the
// numbers per rate, the configuration they were measured with (a gate run reuses it, so code and
// baseline cannot drift apart silently), the command that regenerates it and where it came from.
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { BaselineRate, GateThresholds, RateMeasurement } from './judge.ts';
import type { GateConfig } from './run.ts';
import { machineProbe, sourceInfo } from '../provenance.ts';

export const BASELINE_FORMAT = 'headroom-gate-baseline';

export interface BaselineFile {
  readonly format: typeof BASELINE_FORMAT;
  readonly version: 1;
  /** Regenerates this file (docs/ci-gate.md: only with a reason in the commit). */
  readonly command: string;
  readonly createdAt: string;
  readonly source: unknown;
  readonly machine: unknown;
  readonly config: GateConfig;
  readonly thresholds: GateThresholds;
  /** What each rate measured; the verdict reads rate, goodputRps and p99E2eMs. */
  readonly rates: readonly (BaselineRate & Omit<RateMeasurement, 'rate' | 'goodputRps' | 'p99E2eMs'>)[];
}

export function readBaseline(file: string): BaselineFile {
  const b = JSON.parse(readFileSync(file, 'utf8')) as Partial<BaselineFile>;
  if (b.format !== BASELINE_FORMAT || b.version !== 1) throw new Error(`${file}: expected a ${BASELINE_FORMAT} v1 file, got format ${String(b.format)} v${String(b.version)}`);
  const rates: readonly Partial<BaselineRate>[] | undefined = b.rates;
  if (b.config === undefined || rates === undefined || rates.length === 0) throw new Error(`${file}: expected a config and at least one rate`);
  for (const r of rates) {
    const { rate, goodputRps, p99E2eMs } = r;
    if (typeof rate !== 'number' || !(goodputRps !== undefined && goodputRps > 0) || !(p99E2eMs !== undefined && p99E2eMs > 0 && Number.isFinite(p99E2eMs))) throw new Error(`${file}: rate ${String(rate)}: expected goodput > 0 and a finite p99 > 0, got ${String(goodputRps)} and ${String(p99E2eMs)}`);
  }
  return b as BaselineFile;
}

export async function writeBaseline(file: string, config: GateConfig, thresholds: GateThresholds, measured: readonly RateMeasurement[], command: string): Promise<BaselineFile> {
  const b: BaselineFile = {
    format: BASELINE_FORMAT,
    version: 1,
    command,
    createdAt: new Date().toISOString(),
    source: sourceInfo(),
    machine: machineProbe(),
    config,
    thresholds,
    rates: measured.map((m) => ({ ...m })),
  };
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, JSON.stringify(b, null, 2) + '\n');
  return b;
}
