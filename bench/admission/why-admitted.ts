// Benchmark analysis (not a test): which admission rule admitted each request of a recorded run,
// and whether it met its budget. For every finished request of a flight recording (`--record`, or
// RECORD=1 in bench/peer/*.sh): the decision's reason (fits, headroom, explore, ...), its bound,
// max_tokens, the output and the server-side E2E from arrival to finish; then, per reason, misses
// of the E2E budget over admissions.
//
//   node --import tsx bench/admission/why-admitted.ts <run-dir>/recording [--each]
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isRecording, readRecording } from '../../src/obs/recorder/reader.ts';

const dir = process.argv[2];
const each = process.argv.includes('--each');
if (dir === undefined) {
  console.error('usage: why-admitted.ts <recording-dir> [--each]   (the --record folder, or one run folder in it)');
  process.exit(2);
}
const runs = (await isRecording(dir)) ? [dir] : (await readdir(dir)).map((n) => join(dir, n));
for (const run of runs) {
  if (!(await isRecording(run))) continue;
  const rec = await readRecording(run);
  const decisions = new Map(rec.decisions.map((d) => [d.id, d]));
  const admitted = new Map<string, number>();
  const missed = new Map<string, number>();
  const rows: string[] = [];
  for (const d of [...rec.done].sort((a, b) => a.arr - b.arr)) {
    const dec = decisions.get(d.id);
    const why = dec?.why ?? 'undecided';
    const e2e = d.fin === null ? null : d.fin - d.arr;
    const miss = e2e === null || (dec !== undefined && e2e > dec.budget);
    admitted.set(why, (admitted.get(why) ?? 0) + 1);
    if (miss) missed.set(why, (missed.get(why) ?? 0) + 1);
    const bound = dec?.bound == null ? '—' : `${Math.round(dec.bound)} ms`;
    rows.push(`  arrival ${(d.arr / 1000).toFixed(1)} s  ${why.padEnd(14)} bound ${bound.padStart(9)}  max_tokens ${String(d.m).padStart(4)}  out ${String(d.n).padStart(4)}  E2E ${e2e === null ? '—' : `${Math.round(e2e)} ms`}${miss ? '  MISS' : ''}`);
  }
  const summary = [...admitted].map(([why, n]) => `${why} ${missed.get(why) ?? 0}/${n}`).join(', ');
  console.log(`${run}: missed/admitted by reason: ${summary}`);
  if (each) console.log(rows.join('\n'));
}
