// The study's arrival realisations: written once before the sweep, kept on a resume, and a run
// whose schedule no longer matches them (the generator or workload changed) refuses to start.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { verifyArrivals, writeArrivals } from '../../src/harness/ladder/arrivals.ts';
import { benchConfigFor, DEFAULT_LADDER } from '../../src/harness/ladder/config.ts';

test('arrivals are recorded per (rate, seed), kept on a resume, and a changed schedule is refused', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'headroom-arrivals-'));
  try {
    const c = { ...DEFAULT_LADDER, durationS: 20 };
    const bench = (rate: number, seed: number, cfg = c) => benchConfigFor(cfg, 'http://127.0.0.1:1', rate, seed, {}, null);
    await writeArrivals(dir, [{ rate: 1.5, seed: 1, bench: bench(1.5, 1) }, { rate: 1.5, seed: 2, bench: bench(1.5, 2) }]);
    const file = path.join(dir, 'arrivals', 'rate-1.5-seed-1.parquet');
    assert.ok(existsSync(file));
    const digests = JSON.parse(readFileSync(path.join(dir, 'arrivals', 'digests.json'), 'utf8')) as Record<string, { digest: string; num_arrivals: number }>;
    assert.notEqual(digests['rate-1.5-seed-1']!.digest, digests['rate-1.5-seed-2']!.digest, 'seeds give different realisations');
    assert.ok(digests['rate-1.5-seed-1']!.num_arrivals > 10);

    await verifyArrivals(dir, 1.5, 1, bench(1.5, 1));
    // The URL and headers are not part of the schedule.
    await verifyArrivals(dir, 1.5, 1, benchConfigFor(c, 'http://127.0.0.1:9', 1.5, 1, { authorization: 'Bearer x' }, null));
    // A different workload draw (here: another tokens-per-word) is a different schedule.
    await assert.rejects(verifyArrivals(dir, 1.5, 1, bench(1.5, 1, { ...c, tokensPerWord: 1.3 })), /differ from those recorded before the sweep/);
    await assert.rejects(verifyArrivals(dir, 3, 1, bench(3, 1)), /no recorded arrivals for rate-3-seed-1/);

    // A resume keeps what was recorded (the file is not rewritten).
    const mtime = statSync(file).mtimeMs;
    await writeArrivals(dir, [{ rate: 1.5, seed: 1, bench: bench(1.5, 1) }]);
    assert.equal(statSync(file).mtimeMs, mtime);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
