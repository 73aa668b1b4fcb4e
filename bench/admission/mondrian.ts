// Offline: one marginal conformal quantile vs per-class (Mondrian) quantiles, on collected traces.
//
//   node --import tsx bench/admission/mondrian.ts <collect-root> <artifact.json> [sloMs=4000] [calRound=round-1] [testRound=round-2]
//
// The artifact's predictor gives ŷ for every row; the calibration round gives the scores (ratio
// score), the test round measures. Classes are functions of admission-time facts only, so each
// class is exchangeable within itself and split conformal's guarantee holds per class (and so
// marginally). Reported per scheme: coverage overall and per class, and the share of test requests
// that in fact met the SLO whose bound fits it (what the controller would keep of the goodput),
// overall and for the lowest-rate blocks.
import { loadDataset } from '../../src/admission/dataset.ts';
import { NUM_FEATURES, FEATURE_NAMES } from '../../src/admission/features.ts';
import { conformalQuantile } from '../../src/admission/conformal/quantile.ts';
import { ratioScore } from '../../src/admission/conformal/score.ts';
import { wilson } from '../../src/admission/evaluate.ts';
import { loadArtifact } from '../../src/admission/predictor/artifact.ts';
import { toPredictor } from '../../src/admission/predictor/predictor.ts';

const [root, artifactPath, sloArg, calRound = '1', testRound = '2'] = process.argv.slice(2);
if (root === undefined || artifactPath === undefined) throw new Error('usage: mondrian.ts <collect-root> <artifact.json> [sloMs] [calRound] [testRound]');
const sloMs = Number(sloArg ?? 4000);
const loaded = loadArtifact(artifactPath);
if (!loaded.ok) throw new Error(loaded.reason);
const predictor = toPredictor(loaded.artifact.model);
const ds = loadDataset(root, 'e2e');
const col = (name: string): number => FEATURE_NAMES.indexOf(name as (typeof FEATURE_NAMES)[number]);
interface Row {
  yhat: number;
  y: number;
  x: Float64Array;
  rate: number;
}
const rows = (round: string): Row[] => {
  const out: Row[] = [];
  for (let i = 0; i < ds.numRows; i++) {
    if (ds.round[i] !== round) continue;
    const x = ds.x.subarray(i * NUM_FEATURES, (i + 1) * NUM_FEATURES);
    out.push({ yhat: Math.max(0, predictor.predict(x)), y: ds.y[i]!, x, rate: ds.rate[i]! });
  }
  return out;
};
const cal = rows(calRound);
const test = rows(testRound);
const lowRate = Math.min(...test.map((r) => r.rate));

type ClassOf = (r: Row) => string;
const schemes: { name: string; classOf: ClassOf }[] = [
  { name: 'marginal', classOf: () => 'all' },
  { name: 'by ŷ vs SLO (<¼, <½, <1, ≥1)', classOf: (r) => (r.yhat < sloMs / 4 ? 'a:<1/4' : r.yhat < sloMs / 2 ? 'b:<1/2' : r.yhat < sloMs ? 'c:<1' : 'd:>=1') },
  { name: 'by ŷ vs SLO (<½, ≥½)', classOf: (r) => (r.yhat < sloMs / 2 ? 'a:<1/2' : 'b:>=1/2') },
  { name: 'by load (queue empty and ≤1 running)', classOf: (r) => (r.x[col('prompt_work_ahead')]! === 0 && r.x[col('waiting')]! === 0 && r.x[col('running')]! <= 1 ? 'light' : 'busy') },
];
const minN = 30;
const fmt = (x: number): string => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : '—');
console.log(`calibration ${calRound}: ${cal.length} rows; test ${testRound}: ${test.length} rows; SLO ${sloMs} ms; lowest test rate ${lowRate} req/s; class min n ${minN} (else the marginal quantile)\n`);
for (const alpha of [0.2, 0.05]) {
  console.log(`## α = ${alpha}\n`);
  console.log('| scheme | coverage [95% CI] | per class: n cal, coverage | SLO-meeting requests kept | kept at lowest rate |');
  console.log('|---|---|---|---|---|');
  const marginalQ = conformalQuantile(Float64Array.from(cal.map((r) => ratioScore.score(r.yhat, r.y))).sort(), alpha);
  for (const s of schemes) {
    const byClass = new Map<string, number[]>();
    for (const r of cal) {
      const k = s.classOf(r);
      const scores = byClass.get(k) ?? [];
      scores.push(ratioScore.score(r.yhat, r.y));
      byClass.set(k, scores);
    }
    const qOf = new Map<string, number>();
    for (const [k, v] of byClass) qOf.set(k, v.length >= minN ? conformalQuantile(Float64Array.from(v).sort(), alpha) : marginalQ);
    const boundOf = (r: Row): number => ratioScore.bound(r.yhat, qOf.get(s.classOf(r)) ?? marginalQ);
    const covered = test.filter((r) => r.y <= boundOf(r)).length;
    const [lo, hi] = wilson(covered, test.length);
    const classes = [...new Set(test.map(s.classOf))].sort();
    const per = classes.map((k) => {
      const t = test.filter((r) => s.classOf(r) === k);
      return `${k}: ${byClass.get(k)?.length ?? 0}, ${fmt(t.filter((r) => r.y <= boundOf(r)).length / t.length)} of ${t.length}`;
    });
    const good = test.filter((r) => r.y <= sloMs);
    const kept = good.filter((r) => boundOf(r) <= sloMs).length / good.length;
    const goodLow = good.filter((r) => r.rate === lowRate);
    const keptLow = goodLow.filter((r) => boundOf(r) <= sloMs).length / goodLow.length;
    console.log(`| ${s.name} | ${fmt(covered / test.length)} [${fmt(lo)}, ${fmt(hi)}] | ${per.join('; ')} | ${fmt(kept)} of ${good.length} | ${fmt(keptLow)} of ${goodLow.length} |`);
  }
  console.log('');
}
