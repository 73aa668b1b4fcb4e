// `headroom admission train|evaluate`: fit the E2E (or TTFT) predictor on collected traces
// (bench/admission/collect.sh), and measure the conformal bound offline on whole held-out rounds.
import type { Command } from 'commander';
import { Option } from 'commander';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { PooledRow, Rotation } from '../../admission/evaluate.ts';

interface GbdtFlags {
  gbdtRounds?: string;
  gbdtLearningRate?: string;
  gbdtDepth?: string;
}

interface TrainOpts extends GbdtFlags {
  traces: string;
  target: 'e2e' | 'ttft';
  model: 'gbdt' | 'linear' | 'constant';
  quantile: string;
  rounds?: string;
  out: string;
  runner: string;
  modelFile?: string;
}

interface EvaluateOpts extends GbdtFlags {
  traces: string;
  target: 'e2e' | 'ttft';
  train: string;
  calibrate: string;
  test: string;
  alphas: string;
  sloMs: string;
  out?: string;
  rotate?: string;
}

const pct = (x: number): string => (Number.isNaN(x) ? '-' : `${(100 * x).toFixed(1)}%`);
/** The GBDT flags as fitGbdt options (unset: its defaults, 200 trees at 0.1, depth 4). */
function gbdtOptions(o: GbdtFlags): { numRounds?: number; learningRate?: number; maxDepth?: number } | undefined {
  const out = {
    ...(o.gbdtRounds === undefined ? {} : { numRounds: Number(o.gbdtRounds) }),
    ...(o.gbdtLearningRate === undefined ? {} : { learningRate: Number(o.gbdtLearningRate) }),
    ...(o.gbdtDepth === undefined ? {} : { maxDepth: Number(o.gbdtDepth) }),
  };
  return Object.keys(out).length === 0 ? undefined : out;
}

function addGbdtFlags(c: Command): Command {
  return c
    .option('--gbdt-rounds <n>', 'GBDT: trees (default 200; fewer trees make each decision cheaper)')
    .option('--gbdt-learning-rate <x>', 'GBDT: shrinkage per tree (default 0.1)')
    .option('--gbdt-depth <d>', 'GBDT: tree depth (default 4)');
}

const list = (s: string): string[] => s.split(',').map((x) => x.trim()).filter((x) => x.length > 0);

export function registerAdmissionCommands(program: Command): void {
  const admission = program.command('admission').description('Admission control: fit and evaluate the latency predictor');
  const trainCommand = admission
    .command('train')
    .description('Fit a quantile predictor on admission traces and save it as an artifact for serve --admission-artifact')
    .requiredOption('--traces <dir>', 'folder of traces (round-<r>/rate-<x>/trace.jsonl)')
    .addOption(new Option('--target <t>', 'latency to predict').choices(['e2e', 'ttft']).default('e2e'))
    .addOption(new Option('--model <kind>', 'predictor').choices(['gbdt', 'linear', 'constant']).default('gbdt'))
    .option('--quantile <tau>', 'base quantile level (the conformal step inflates it to the guarantee)', '0.9')
    .option('--rounds <list>', 'train on these collection rounds only (default: all)')
    .requiredOption('--out <file>', 'artifact path')
    .option('--runner <name>', 'runner the traces were collected on (provenance): llama, mock, or gateway (traces a gateway wrote in front of its upstreams)', 'llama')
    .option('--model-file <gguf>', 'model the traces were collected on (its sha256 goes into the provenance)');
  addGbdtFlags(trainCommand).action(async (o: TrainOpts) => {
    const { loadDataset } = await import('../../admission/dataset.ts');
    const { train } = await import('../../admission/predictor/train.ts');
    const { saveArtifact } = await import('../../admission/predictor/artifact.ts');
    const { GATEWAY_MODEL_SHA, fileSha256, machineIdentity } = await import('../../admission/provenance.ts');
    const { LINEAR_COLUMNS } = await import('../../admission/evaluate.ts');
    const ds = loadDataset(o.traces, o.target);
    const rounds = o.rounds === undefined ? null : new Set(list(o.rounds));
    const k = ds.featureNames.length;
    const idx = Array.from({ length: ds.numRows }, (_, i) => i).filter((i) => rounds === null || rounds.has(ds.round[i]!));
    if (idx.length === 0) throw new Error(`no usable rows in ${o.traces}${rounds === null ? '' : ` for rounds ${o.rounds}`}`);
    const gbdt = gbdtOptions(o);
    const spec = o.model === 'gbdt' ? { kind: 'gbdt' as const, ...(gbdt === undefined ? {} : { options: gbdt }) } : o.model === 'linear' ? { kind: 'linear' as const, columns: LINEAR_COLUMNS } : { kind: 'constant' as const };
    const r = train({
      featureNames: ds.featureNames,
      X: idx.map((i) => ds.x.subarray(i * k, (i + 1) * k)),
      y: idx.map((i) => ds.y[i]!),
      quantile: Number(o.quantile),
      model: spec,
      provenance: {
        runner: o.runner,
        modelSha256: o.runner === 'mock' ? 'mock' : o.runner === 'gateway' ? GATEWAY_MODEL_SHA : o.modelFile === undefined ? 'unknown' : await fileSha256(o.modelFile),
        machine: machineIdentity(),
        command: `headroom ${process.argv.slice(2).join(' ')}`,
        createdAt: new Date().toISOString(),
      },
  });
  mkdirSync(dirname(o.out), { recursive: true });
  saveArtifact(o.out, r.artifact);
  for (const w of r.warnings) process.stderr.write(`warning: ${w}\n`);
  process.stdout.write(`${o.out}: ${o.model} on ${idx.length} rows (${ds.numDropped} censored or refused dropped), train pinball ${r.trainPinball.toFixed(1)} ms, ${r.seconds.toFixed(1)} s\n`);
  });
  const evaluateCommand = admission
    .command('evaluate')
    .description('Offline coverage and bound width on whole held-out rounds, against the throughput-arithmetic and constant baselines')
    .requiredOption('--traces <dir>', 'folder of traces (round-<r>/rate-<x>/trace.jsonl)')
    .addOption(new Option('--target <t>', 'latency bounded').choices(['e2e', 'ttft']).default('e2e'))
    .option('--train <rounds>', 'training rounds', '0,1')
    .option('--calibrate <rounds>', 'calibration rounds', '2')
    .option('--test <rounds>', 'test rounds', '3')
    .option('--alphas <list>', 'miscoverage levels', '0.2,0.1,0.05,0.01')
    .option('--slo-ms <ms>', 'SLO for the admit share', '4000')
    .option('--out <file>', 'write the evaluation as JSON')
    .option('--rotate <n>', 'instead of --train/--calibrate/--test: every round the test round once, the next n rounds calibrating, the rest training; pooled coverage over the rotations (a markdown report on stdout)');
  addGbdtFlags(evaluateCommand).action(async (o: EvaluateOpts) => {
    const { blocksOf, loadDataset } = await import('../../admission/dataset.ts');
    const { evaluate, evaluateRotations } = await import('../../admission/evaluate.ts');
    const ds = loadDataset(o.traces, o.target);
    if (o.rotate !== undefined) {
      const rounds = [...new Set(ds.round)].sort((a, b) => Number(a) - Number(b));
      const res = evaluateRotations(ds, rounds, Number(o.rotate), { alphas: list(o.alphas).map(Number), sloMs: Number(o.sloMs), ...(gbdtOptions(o) === undefined ? {} : { gbdt: gbdtOptions(o)! }) }, (r) => blocksOf(ds, r));
      process.stdout.write(rotationReport(res, `headroom ${process.argv.slice(2).join(' ')}`, ds.numRows, ds.numDropped, Number(o.sloMs)));
      if (o.out !== undefined) {
        mkdirSync(dirname(o.out), { recursive: true });
        writeFileSync(o.out, `${JSON.stringify({ traces: o.traces, target: o.target, rotate: Number(o.rotate), sloMs: Number(o.sloMs), ...res }, null, 1)}\n`);
      }
      return;
    }
    const ev = evaluate(ds, {
      train: blocksOf(ds, list(o.train)),
      calibration: blocksOf(ds, list(o.calibrate)),
      test: blocksOf(ds, list(o.test)),
      alphas: list(o.alphas).map(Number),
      sloMs: Number(o.sloMs),
      ...(gbdtOptions(o) === undefined ? {} : { gbdt: gbdtOptions(o)! }),
  });
  const lines = ['| predictor | score | level | α | coverage [95% CI] | mean bound | median bound | admit share |', '|---|---|---|---|---|---|---|---|'];
  for (const r of ev.rows) {
    lines.push(`| ${r.predictor} | ${r.score} | ${r.level} | ${r.alpha} | ${pct(r.coverage)} [${pct(r.coverageLow)}, ${pct(r.coverageHigh)}] | ${r.meanBoundMs.toFixed(0)} ms | ${r.medianBoundMs.toFixed(0)} ms | ${pct(r.admitShare)} |`);
  }
  process.stdout.write(`${ds.numRows} rows (${ds.numDropped} dropped); train ${ev.numTrain}; chosen: ${ev.selection === null ? 'ratio/0.9 (default: too few training blocks to hold out)' : `${ev.selection.score}/${ev.selection.level}`}\n${lines.join('\n')}\n`);
  if (o.out !== undefined) {
    mkdirSync(dirname(o.out), { recursive: true });
    writeFileSync(o.out, `${JSON.stringify({ traces: o.traces, target: o.target, folds: { train: o.train, calibrate: o.calibrate, test: o.test }, sloMs: Number(o.sloMs), ...ev }, null, 1)}\n`);
  }
  });
}

/** The markdown report of a rotated evaluation: pooled coverage and widths, then each rotation. */
function rotationReport(res: { rotations: Rotation[]; pooled: PooledRow[] }, command: string, numRows: number, numDropped: number, sloMs: number): string {
  const lines = [
    '# Offline coverage, every round the test round once',
    '',
    `Generated by \`${command}\`: ${numRows} rows (${numDropped} censored or refused dropped).`,
    'Per rotation the test round is held out whole, the next rounds calibrate, the rest train; the score and base level are chosen on a',
    'held-out slice of the training fold. "Pooled" sums the test rows of every rotation (its Wilson interval is over rows and understates',
    'the spread between rounds, which the min–max over rotations shows). "Admitted" are test rows whose bound fits the',
    `${sloMs} ms SLO (what the controller would admit), and "inside SLO" the share of those that finished inside it.`,
    '',
    '| predictor | score | α | target | pooled coverage [95% CI] | min–max over rotations | mean bound | admitted | admitted inside SLO |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of res.pooled) {
    const inside = r.numAdmitted === 0 ? '-' : `${pct(r.numAdmittedInsideSlo / r.numAdmitted)} (${r.numAdmittedInsideSlo}/${r.numAdmitted})`;
    lines.push(`| ${r.predictor} | ${r.score} | ${r.alpha} | ${pct(1 - r.alpha)} | ${pct(r.coverage)} [${pct(r.coverageLow)}, ${pct(r.coverageHigh)}] of ${r.numTest} | ${pct(r.rotationMin)}–${pct(r.rotationMax)} | ${(r.meanBoundMs / 1000).toFixed(1)} s | ${pct(r.admitShare)} | ${inside} |`);
  }
  lines.push('', '## Rotations', '', '| test | calibrate | train | chosen | GBDT coverage at each α (its score) |', '|---|---|---|---|---|');
  for (const rot of res.rotations) {
    const ev = rot.evaluation;
    const chosen = ev.selection === null ? 'ratio/0.9 (default)' : `${ev.selection.score}/${ev.selection.level}`;
    const score = ev.selection?.score ?? 'ratio';
    const cov = ev.rows.filter((r) => r.predictor === 'gbdt' && r.score === score).map((r) => `${r.alpha}: ${pct(r.coverage)}`);
    lines.push(`| ${rot.test} | ${rot.calibration.join(', ')} | ${rot.train.join(', ')} | ${chosen} | ${cov.join(', ')} |`);
  }
  return `${lines.join('\n')}\n`;
}
