// Offline: what the under-capacity shortcut's rule (src/admission/decision/headroom.ts) would have
// admitted on collected traces, and how many of those met the SLO. The traces were collected with
// admission off, so the states are those of an unmanaged engine (under admission, fewer requests
// run beside each one: this is the pessimistic side).
//
//   node --import tsx bench/admission/headroom-offline.ts <collect-root> [sloMs=4000] [maxSequences=16]
import { loadDataset } from '../../src/admission/dataset.ts';
import { NUM_FEATURES } from '../../src/admission/features.ts';
import { Headroom } from '../../src/admission/decision/headroom.ts';

const [root, sloArg, seqArg] = process.argv.slice(2);
if (root === undefined) throw new Error('usage: headroom-offline.ts <collect-root> [sloMs] [maxSequences]');
const sloMs = Number(sloArg ?? 4000);
const view = { maxSequences: Number(seqArg ?? 16) };
const ds = loadDataset(root, 'e2e');
console.log(`${ds.numRows} uncensored rows from ${root}; SLO ${sloMs} ms; ${view.maxSequences} sequence slots\n`);
console.log('| queue | margin | max running share | rate (req/s) | rows | rule admits | of those inside SLO | SLO-meeting rows the rule admits |');
console.log('|---|---|---|---|---|---|---|---|');
for (const allowQueue of [false, true]) {
  for (const margin of [1.25, 1.5, 2]) {
    for (const maxRunningFraction of [0.25, 0.5]) {
      const h = new Headroom({ alpha: 0.05, margin, maxRunningFraction, allowQueue });
      const byRate = new Map<number, { n: number; admit: number; admitOk: number; ok: number }>();
      for (let i = 0; i < ds.numRows; i++) {
        const x = ds.x.subarray(i * NUM_FEATURES, (i + 1) * NUM_FEATURES);
        const est = h.estimate(x, view);
        const admit = est !== null && est.e2eMs <= sloMs;
        const ok = ds.y[i]! <= sloMs;
        const r = byRate.get(ds.rate[i]!) ?? { n: 0, admit: 0, admitOk: 0, ok: 0 };
        byRate.set(ds.rate[i]!, r);
        r.n++;
        if (ok) r.ok++;
        if (admit) r.admit++;
        if (admit && ok) r.admitOk++;
      }
      for (const [rate, r] of [...byRate].sort((a, b) => a[0] - b[0])) {
        const pct = (a: number, b: number): string => (b === 0 ? '-' : `${((100 * a) / b).toFixed(0)}% (${a}/${b})`);
        console.log(`| ${allowQueue ? 'read' : 'empty only'} | ${margin} | ${maxRunningFraction} | ${rate} | ${r.n} | ${r.admit} | ${pct(r.admitOk, r.admit)} | ${pct(r.admitOk, r.ok)} |`);
      }
    }
}
}
