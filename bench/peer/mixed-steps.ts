// Benchmark analysis (not a test): what a prompt row costs in the steps of a recorded run
// (bench/peer/long.sh with RECORD=1), split by whether decoding requests shared the step, within
// bins of the rows' mean position (a row deeper in its prompt attends over more cells, so only
// rows at similar depths compare). Also lists the steps that carry a prompt's last, partial chunk,
// whose row count is off a multiple of 64 (docs/per-token.md §3, §17).
//
//   node --import tsx bench/peer/mixed-steps.ts <run-dir>/<config>/recording [--each]
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isRecording, readRecording } from '../../src/obs/recorder/reader.ts';

const recDir = process.argv[2];
if (recDir === undefined) {
  console.error('usage: mixed-steps.ts <recording-dir> [--each]');
  process.exit(2);
}
const found = [];
for (const n of (await readdir(recDir)).map((x) => join(recDir, x))) if (await isRecording(n)) found.push(n);
if (found.length !== 1) throw new Error(`${recDir}: expected one recording, found ${found.length}`);
const rec = await readRecording(found[0]!);
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
const BIN = 512;
const bins = new Map<string, number[]>();
const each = process.argv.includes('--each');
for (const s of rec.steps) {
  if (s.ok !== 1 || s.c === null) continue;
  // A row count of 1 is a decoding request's token; more is a prompt chunk.
  const prompt = s.r.filter((x) => x[1] > 1);
  const decode = s.r.filter((x) => x[1] === 1);
  if (prompt.length === 0) continue;
  const rows = prompt.reduce((a, x) => a + x[1], 0);
  const meanPos = prompt.reduce((a, [, n, p]) => a + n * (p + n / 2), 0) / rows;
  const total = rows + decode.length;
  const kind = `${decode.length === 0 ? 'prompt only' : 'beside decoding'}, ${total % 64 === 0 ? 'rows a multiple of 64' : 'rows off a multiple of 64'}`;
  const key = `${kind} | mean position ${Math.floor(meanPos / BIN) * BIN}–${Math.floor(meanPos / BIN) * BIN + BIN}`;
  bins.set(key, [...(bins.get(key) ?? []), s.c / rows]);
  if (each) console.log(`${(s.s / 1000).toFixed(2)} s  ${total} rows: prompt ${prompt.map((x) => `${x[1]}@${x[2]}`).join(' + ')}; decoding at ${decode.map((x) => x[2]).join(', ') || '-'}  ${s.c.toFixed(1)} ms  (${(s.c / rows).toFixed(3)} ms a prompt row)`);
}
console.log('ms of llama_decode per prompt row, median (steps)');
for (const [k, v] of [...bins].sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }))) console.log(`  ${k.padEnd(85)} ${median(v).toFixed(3)} (${v.length})`);
