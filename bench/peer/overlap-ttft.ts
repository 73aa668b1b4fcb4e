// Benchmark analysis (not a test): where a Headroom request's time to first token goes, from a
// recorded bench/peer/long.sh run (RECORD=1), beside llama-server's time for the same request in
// the same seed. For each request answered by both: Headroom's wait before its first step, its
// prefill span, the steps that carried its prompt (how many, their rows, the other requests' rows
// in them) and llama-server's TTFT; split by whether it arrived while another was in flight (on
// llama-server's timeline, as bench/peer/long-table.ts does).
//
//   node --import tsx bench/peer/overlap-ttft.ts <seed-dir>/rate-<r>   (holds headroom-host/ and llama-server/)
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { readRecords } from '../../src/harness/store.ts';
import type { RequestRecord } from '../../src/harness/record.ts';
import { isRecording, readRecording } from '../../src/obs/recorder/reader.ts';

const dir = process.argv[2];
const mine = process.argv[3] ?? 'headroom-host';
if (dir === undefined) {
  console.error('usage: overlap-ttft.ts <run-dir> [headroom-config]');
  process.exit(2);
}
// The run's --record folder holds one recording (a folder per server start).
const recDir = join(dir, mine, 'recording');
const run = (await readdir(recDir)).map((n) => join(recDir, n));
const found = [];
for (const r of run) if (await isRecording(r)) found.push(r);
if (found.length !== 1) throw new Error(`${recDir}: expected one recording, found ${found.length}`);
const rec = await readRecording(found[0]!);
const done = [...rec.done].sort((a, b) => a.arr - b.arr);
const steps = rec.steps;
const ok = (r: RequestRecord): boolean => r.http_status === 200 && r.ttft_ms !== null;
const hr = (await readRecords(join(dir, mine))).filter(ok).sort((a, b) => a.intended_ms - b.intended_ms);
const baseRows = await readRecords(join(dir, 'llama-server'));
const base = new Map(baseRows.filter(ok).map((r) => [r.request_id, r]));
const beside = (r: RequestRecord): boolean => baseRows.some((o) => o.request_id !== r.request_id && o.intended_ms < r.intended_ms && o.end_ms > r.intended_ms);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
const r0 = (x: number): string => x.toFixed(0);

// The recording's requests in arrival order, matched to the harness's by order and prompt size.
const warm = done.length - hr.length;
const rows: { cls: string; prompt: number; cached: number; ours: number; theirs: number; wait: number; span: number; nSteps: number; chunk: number; others: number }[] = [];
for (let i = 0; i < hr.length; i++) {
  const d = done[i + Math.max(0, warm)];
  const h = hr[i]!;
  const b = base.get(h.request_id);
  if (d === undefined || b === undefined || d.ft === null) continue;
  const mineSteps = steps.filter((s) => s.e <= d.ft! + 0.001 && s.r.some((x) => x[0] === d.id));
  if (mineSteps.length === 0) continue;
  const chunks = mineSteps.map((s) => s.r.find((x) => x[0] === d.id)![1]);
  const others = mineSteps.map((s) => s.r.filter((x) => x[0] !== d.id).reduce((a, x) => a + x[1], 0));
  rows.push({ cls: beside(b) ? 'beside' : 'alone', prompt: d.p, cached: d.cached, ours: h.ttft_ms!, theirs: b.ttft_ms!, wait: mineSteps[0]!.s - d.arr, span: d.ft - mineSteps[0]!.s, nSteps: mineSteps.length, chunk: median(chunks), others: others.reduce((a, x) => a + x, 0) / others.length });
}
for (const cls of ['alone', 'beside']) {
  const xs = rows.filter((r) => r.cls === cls);
  console.log(`${cls}: ${xs.length} requests; TTFT median ${r0(median(xs.map((x) => x.ours)))} ms (llama-server ${r0(median(xs.map((x) => x.theirs)))}), per-request ratio ${median(xs.map((x) => x.ours / x.theirs)).toFixed(2)}; Headroom's wait before its first step ${r0(median(xs.map((x) => x.wait)))} ms, prefill span ${r0(median(xs.map((x) => x.span)))} ms over ${median(xs.map((x) => x.nSteps))} steps of ${r0(median(xs.map((x) => x.chunk)))} prompt rows (median), other rows a step ${median(xs.map((x) => x.others)).toFixed(1)}`);
}
console.log('\nrequest by request: class, prompt tokens (cached in Headroom), TTFT ours / theirs, wait, span, steps, chunk, other rows');
for (const x of rows) console.log(`  ${x.cls.padEnd(6)} ${x.prompt} (${x.cached})  ${r0(x.ours)} / ${r0(x.theirs)}  wait ${r0(x.wait)}  span ${r0(x.span)}  steps ${x.nSteps}  chunk ${r0(x.chunk)}  others ${x.others.toFixed(1)}`);
