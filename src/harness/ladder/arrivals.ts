// The study's arrival realisations, fixed before the sweep: for every (rate, seed) the schedule the
// harness will send (intended times and the workload draws) is written to
// `arrivals/rate-<r>-seed-<s>.parquet`, and a digest of it (times and full request bodies) to
// `arrivals/digests.json`. Every run redraws its schedule and refuses to start unless the digest
// matches, so a resumed or re-run sweep sends exactly the arrivals the study was planned with —
// and a change to the generator or the workload between two halves of a study stops it loudly
// instead of mixing two arrival processes in one table.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { BenchConfig } from '../run.ts';
import { drawSchedule } from '../run.ts';
import { SCHEDULE_COLUMNS, writeParquet } from '../store.ts';
import { rateLabel } from './plan.ts';

export const ARRIVALS_DIR = 'arrivals';
const DIGESTS_FILE = 'digests.json';

const key = (rate: number, seed: number): string => `rate-${rateLabel(rate)}-seed-${seed}`;

/** sha256 over the schedule's intended times and every request body, in order. */
export function scheduleDigest(c: BenchConfig): { digest: string; numArrivals: number } {
  const { arrivalsMs, specs } = drawSchedule(c);
  const h = createHash('sha256');
  for (let i = 0; i < arrivalsMs.length; i++) {
    const s = specs[i]!;
    h.update(`${arrivalsMs[i]!.toFixed(6)}|${s.klass}|${s.prefixId ?? ''}|${s.maxTokens}|${JSON.stringify(s.messages)}\n`);
  }
  return { digest: h.digest('hex'), numArrivals: arrivalsMs.length };
}

/** Writes every (rate, seed) schedule and the digests; keeps existing files (a resumed study). */
export async function writeArrivals(studyDir: string, configs: ReadonlyArray<{ rate: number; seed: number; bench: BenchConfig }>): Promise<void> {
  const dir = path.join(studyDir, ARRIVALS_DIR);
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, DIGESTS_FILE);
  const digests: Record<string, { digest: string; num_arrivals: number }> = existsSync(file) ? (JSON.parse(await readFile(file, 'utf8')) as Record<string, { digest: string; num_arrivals: number }>) : {};
  for (const { rate, seed, bench } of configs) {
    const k = key(rate, seed);
    if (digests[k] !== undefined) continue;
    const { arrivalsMs, specs } = drawSchedule(bench);
    await writeParquet(
      path.join(dir, `${k}.parquet`),
      SCHEDULE_COLUMNS,
      specs.map((s, i) => ({
        request_id: i, intended_ms: arrivalsMs[i] ?? 0, klass: s.klass, prefix_id: s.prefixId, prompt_tokens_est: s.promptTokensEst,
        prompt_chars: s.messages.reduce((n, m) => n + m.content.length, 0), max_tokens: s.maxTokens,
      })),
    );
    const { digest, numArrivals } = scheduleDigest(bench);
    digests[k] = { digest, num_arrivals: numArrivals };
  }
  const sorted = Object.fromEntries(Object.entries(digests).sort(([a], [b]) => a.localeCompare(b)));
  await writeFile(file, JSON.stringify(sorted, null, 2) + '\n');
}

/** Throws unless the run's schedule is the one recorded before the sweep. */
export async function verifyArrivals(studyDir: string, rate: number, seed: number, bench: BenchConfig): Promise<void> {
  const digests = JSON.parse(await readFile(path.join(studyDir, ARRIVALS_DIR, DIGESTS_FILE), 'utf8')) as Record<string, { digest: string } | undefined>;
  const want = digests[key(rate, seed)]?.digest;
  if (want === undefined) throw new Error(`ladder: no recorded arrivals for ${key(rate, seed)} in ${studyDir}`);
  const got = scheduleDigest(bench).digest;
  if (got !== want) {
    throw new Error(`ladder: the arrivals for ${key(rate, seed)} differ from those recorded before the sweep (the generator or workload changed); start a new study`);
  }
}
