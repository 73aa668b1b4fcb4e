// The dashboard's HTTP side: the page, its JSON (the live window, or a run by name) and the list
// of runs it can open. A run is a folder holding a flight recording (segment files) or a benchmark
// result (records.parquet), found in the --record directory and any --dashboard-runs directories,
// in that order, one or two levels down (`rate-3` or `pass-run/rate-3`). A name is checked segment
// by segment against the run-name pattern (no '..', no absolute path), so a request cannot reach
// outside those directories.
//
//   GET /dashboard                  the page (dashboard-page.ts)
//   GET /dashboard/data             the live engine (LiveView), or ?run=NAME: that recorded run
//   GET /dashboard/runs             {"runs": [names, newest first]}

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { DashboardData } from './dashboard-data.ts';
import { runData } from './dashboard-data.ts';
import { DASHBOARD_HTML } from './dashboard-page.ts';
import type { LiveView } from './live-view.ts';
import type { BenchStore } from './dashboard-results.ts';
import { benchData, isBenchResult } from './dashboard-results.ts';
import { isRecording, readRecording } from './recorder/reader.ts';
import { isRunName } from './recorder/recorder.ts';
import { RequestError } from '../util/request-error.ts';

export interface DashboardDeps {
  /** The live window, once the engine exists (null while loading, and in gateway mode). */
  readonly live: () => LiveView | null;
  /** Folders whose sub-folders are recorded runs. */
  readonly runDirs: readonly string[];
  /** Reads a benchmark result folder (the harness's store, loaded when a result is first opened). */
  readonly bench: () => Promise<BenchStore>;
}

export const DASHBOARD_PATHS = ['/dashboard', '/dashboard/data', '/dashboard/runs'] as const;

export function dashboardPage(): string {
  return DASHBOARD_HTML;
}

export async function dashboardData(deps: DashboardDeps, run: unknown, retryAfterS: number): Promise<DashboardData> {
  if (run === undefined) {
    const live = deps.live();
    if (live === null) throw new RequestError('loading', 'The live dashboard starts once the model is loaded.', { retryAfterS });
    return live.data();
  }
  if (typeof run !== 'string' || !isRunPath(run)) throw new RequestError('invalid_value', "run: expected a run's folder name (letters, digits, '.', '_', '-'; at most one '/'), as /dashboard/runs lists them.", { param: 'run' });
  for (const dir of deps.runDirs) {
    const path = join(dir, ...run.split('/'));
    const recording = await isRecording(path);
    if (!recording && !(await isBenchResult(path))) continue;
    try {
      return recording ? runData(await readRecording(path)) : await benchData(path, run, await deps.bench());
    } catch (e) {
      throw new RequestError('invalid_value', `Run '${run}' could not be read: ${(e as Error).message.split(dir).join('<runs>')}`, { param: 'run' });
    }
  }
  throw new RequestError('route_not_found', `No recorded run named '${run}'; /dashboard/runs lists the runs this server can open.`, { param: 'run' });
}

export async function dashboardRuns(deps: DashboardDeps): Promise<{ runs: string[] }> {
  const runs: string[] = [];
  const seen = new Set<string>();
  const isRun = async (path: string): Promise<boolean> => (await isRecording(path)) || (await isBenchResult(path));
  const names = async (dir: string): Promise<string[]> => (await readdir(dir).catch((): string[] => [])).filter(isRunName).sort().reverse();
  for (const dir of deps.runDirs) {
    for (const name of await names(dir)) {
      const path = join(dir, name);
      if (await isRun(path)) {
        if (!seen.has(name)) runs.push(name);
        seen.add(name);
        continue;
      }
      for (const inner of await names(path)) {
        const both = `${name}/${inner}`;
        if (!seen.has(both) && (await isRun(join(path, inner)))) runs.push(both);
        seen.add(both);
      }
    }
  }
  return { runs };
}

/** A run name, or two joined by one '/'. */
function isRunPath(s: string): boolean {
  const parts = s.split('/');
  return parts.length <= 2 && parts.every(isRunName);
}
