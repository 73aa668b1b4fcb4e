import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import {
  ARTIFACT_VERSION,
  checkArtifact,
  loadArtifact,
  parseArtifact,
  saveArtifact,
  serializeArtifact,
  type PredictorArtifact,
} from '../../../src/admission/predictor/artifact.ts';
import { toPredictor } from '../../../src/admission/predictor/predictor.ts';
import { train, type TrainModelSpec } from '../../../src/admission/predictor/train.ts';
import { heteroscedastic } from './synthetic.ts';

const names = ['prompt_tokens', 'max_tokens', 'queued_tokens'];
const provenance = { runner: 'mock', modelSha256: 'ab'.repeat(32), machine: 'cpu:test x2', command: 'headroom admission train --test', createdAt: '2026-11-30T20:00:00.000Z' };
const data = heteroscedastic(1500, 3, 61);
const fresh = heteroscedastic(500, 3, 62);

function trained(model: TrainModelSpec): PredictorArtifact {
  return train({ featureNames: names, X: data.X, y: data.y, quantile: 0.9, model, provenance }).artifact;
}
const gbdt = trained({ kind: 'gbdt', options: { numRounds: 40, maxDepth: 4, subsample: 0.8, seed: 3 } });
const kinds = [gbdt, trained({ kind: 'linear', columns: ['prompt_tokens', 'queued_tokens'] }), trained({ kind: 'constant' })];

const dir = mkdtempSync(path.join(os.tmpdir(), 'headroom-artifact-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Parses `text`, expecting a rejection whose reason matches `re`. */
function rejects(text: string, re: RegExp): void {
  const r = parseArtifact(text);
  assert.equal(r.ok, false, 'expected a rejection');
  if (!r.ok) assert.match(r.reason, re);
}

describe('predictor artifact', () => {
  it('round-trips every model kind exactly: same model, bit-identical predictions', () => {
    for (const artifact of kinds) {
      const file = path.join(dir, `${artifact.model.kind}.json`);
      saveArtifact(file, artifact);
      const loaded = loadArtifact(file);
      assert.ok(loaded.ok, loaded.ok ? '' : loaded.reason);
      assert.deepEqual(loaded.artifact, artifact);
      const [before, afterLoad] = [toPredictor(artifact.model), toPredictor(loaded.artifact.model)];
      for (const x of fresh.X) assert.ok(Object.is(before.predict(x), afterLoad.predict(x)));
      assert.equal(serializeArtifact(loaded.artifact), serializeArtifact(artifact));
    }
  });

  it('rejects files that are not artifacts, or not this version, with a reason', () => {
    const text = serializeArtifact(gbdt);
    const edit = (f: (a: Record<string, unknown>) => void): string => {
      const a = JSON.parse(text) as Record<string, unknown>;
      f(a);
      return JSON.stringify(a);
    };
    rejects(text.slice(0, text.length / 2), /not JSON/);
    rejects(edit((a) => (a.version = 2)), /expected artifact version 1, got 2/);
    rejects(edit((a) => (a.format = 'something-else')), /malformed artifact/);
    rejects(edit((a) => delete a.provenance), /provenance/);
    rejects(edit((a) => (a.extra = 1)), /extra/);
    rejects(edit((a) => ((a.model as { threshold: unknown[] }).threshold[0] = null)), /threshold/);
    rejects(edit((a) => (a.featureNames = ['one'])), /model has 3 features but featureNames has 1/);
    rejects(edit((a) => (a.quantile = 0.5)), /model quantile 0.9 differs from artifact quantile 0.5/);
    rejects(edit((a) => (a.model as { value: number[] }).value.pop()), /gbdt value has \d+ entries, expected \d+/);
    // A child pointing back at its parent would make predict loop forever.
    rejects(
      edit((a) => {
        const m = a.model as { feature: number[]; left: number[] };
        const k = m.feature.findIndex((f) => f >= 0);
        m.left[k] = k;
      }),
      /has child \d+, expected in/,
    );
    rejects(edit((a) => ((a.model as { feature: number[] }).feature[0] = 7)), /splits on feature 7, expected < 3/);
    const r = loadArtifact(path.join(dir, 'missing.json'));
    assert.ok(!r.ok && /cannot read/.test(r.reason));
    writeFileSync(path.join(dir, 'old.json'), JSON.stringify({ format: 'headroom-latency-predictor', version: 0 }));
    const old = loadArtifact(path.join(dir, 'old.json'));
    assert.ok(!old.ok && /old\.json: expected artifact version 1, got 0/.test(old.reason));
    assert.equal(ARTIFACT_VERSION, 1);
  });

  it('property: replacing any one value of the artifact with a value of another type is rejected', () => {
    const valid = JSON.parse(serializeArtifact(kinds[1]!)) as unknown;
    const paths: (string | number)[][] = [];
    const walk = (v: unknown, at: (string | number)[]): void => {
      if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...at, i]));
      else if (typeof v === 'object' && v !== null) for (const [key, x] of Object.entries(v)) walk(x, [...at, key]);
      else paths.push(at);
    };
    walk(valid, []);
    // training.options records what training was asked; predict never reads it, so it is free-form.
    const checked = paths.filter((at) => at[0] !== 'training' || at[1] !== 'options');
    fc.assert(
      fc.property(fc.constantFrom(...checked), fc.constantFrom<unknown>(null, {}, [], true, 'x'), (at, replacement) => {
        const copy = structuredClone(valid) as Record<string | number, unknown>;
        let parent = copy;
        for (const key of at.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
        const key = at[at.length - 1]!;
        fc.pre(typeof parent[key] !== typeof replacement);
        parent[key] = replacement;
        const r = parseArtifact(JSON.stringify(copy));
        assert.equal(r.ok, false, `replacing ${at.join('.')} with ${JSON.stringify(replacement)} was accepted`);
      }),
      { numRuns: 300 },
    );
  });

  it('reports the provenance fields and feature order that differ from the running system', () => {
    const same = { runner: 'mock', modelSha256: 'ab'.repeat(32), machine: 'cpu:test x2', featureNames: names };
    assert.deepEqual(checkArtifact(gbdt, same), []);
    assert.deepEqual(checkArtifact(gbdt, { ...same, machine: 'gpu:h200', featureNames: [names[1]!, names[0]!, names[2]!] }), [
      { field: 'machine', artifact: 'cpu:test x2', current: 'gpu:h200' },
      { field: 'featureNames', artifact: JSON.stringify(names), current: JSON.stringify([names[1], names[0], names[2]]) },
    ]);
    assert.deepEqual(
      checkArtifact(gbdt, { ...same, runner: 'llama', modelSha256: 'cd' }).map((m) => m.field),
      ['runner', 'modelSha256'],
    );
  });
});
