// The dashboard's HTTP side: the page, its JSON (the live window, or a recorded run by name) and
// the list of runs it can open. Runs are folders holding a flight recording, found in the
// --record directory and any --dashboard-runs directories, in that order; a run is named by its
// folder name alone (never a path), so a request cannot reach outside those directories.
//
//   GET /dashboard                  the page (dashboard-page.ts)
//   GET /dashboard/data             the live engine (LiveView), or ?run=NAME: that recorded run
//   GET /dashboard/runs             {"runs": [names, newest first]}

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ApiError } from '../api/errors.ts';
import type { DashboardData } from './dashboard-data.ts';
import { runData } from './dashboard-data.ts';
import { DASHBOARD_HTML } from './dashboard-page.ts';
import type { LiveView } from './live-view.ts';
import { isRecording, readRecording } from './recorder/reader.ts';
import { isRunName } from './recorder/recorder.ts';

export interface DashboardDeps {
  /** The live window, once the engine exists (null while loading, and in gateway mode). */
  readonly live: () => LiveView | null;
  /** Folders whose sub-folders are recorded runs. */
  readonly runDirs: readonly string[];
}

export const DASHBOARD_PATHS = ['/dashboard', '/dashboard/data', '/dashboard/runs'] as const;

export function dashboardPage(): string {
  return DASHBOARD_HTML;
}

export async function dashboardData(deps: DashboardDeps, run: unknown, retryAfterS: number): Promise<DashboardData> {
  if (run === undefined) {
    const live = deps.live();
    if (live === null) throw new ApiError('loading', 'The live dashboard starts once the model is loaded.', { retryAfterS });
    return live.data();
  }
  if (typeof run !== 'string' || !isRunName(run)) throw new ApiError('invalid_value', "run: expected a run's folder name (letters, digits, '.', '_', '-'), as /dashboard/runs lists them.", { param: 'run' });
  for (const dir of deps.runDirs) {
    const path = join(dir, run);
    if (!(await isRecording(path))) continue;
    try {
      return runData(await readRecording(path));
    } catch (e) {
      throw new ApiError('invalid_value', `Run '${run}' could not be read: ${(e as Error).message.replace(dir, '<runs>')}`, { param: 'run' });
    }
  }
  throw new ApiError('route_not_found', `No recorded run named '${run}'; /dashboard/runs lists the runs this server can open.`, { param: 'run' });
}

export async function dashboardRuns(deps: DashboardDeps): Promise<{ runs: string[] }> {
  const runs: { name: string; order: number }[] = [];
  const seen = new Set<string>();
  for (const [i, dir] of deps.runDirs.entries()) {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch {
      continue;
    }
    for (const name of names.sort().reverse()) {
      if (seen.has(name) || !isRunName(name) || !(await isRecording(join(dir, name)))) continue;
      seen.add(name);
      runs.push({ name, order: i });
    }
  }
  return { runs: runs.map((r) => r.name) };
}
