import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { datasetSha256, train } from '../../../src/admission/predictor/train.ts';
import { heteroscedastic } from './synthetic.ts';

const names = ['a', 'b', 'c'];
const provenance = { runner: 'mock', modelSha256: '00', machine: 'm', command: 'c', createdAt: '2026-11-30T00:00:00Z' };

describe('train', () => {
  it('fits, reports importance by name, and hashes the data when no hash is given', () => {
    const { X, y } = heteroscedastic(1000, 3, 71);
    const r = train({ featureNames: names, X, y, quantile: 0.9, model: { kind: 'gbdt', options: { numRounds: 30 } }, provenance });
    assert.equal(r.artifact.model.kind, 'gbdt');
    assert.deepEqual(r.importance!.map((i) => i.feature), names);
    assert.equal(r.artifact.provenance.dataSha256, datasetSha256(names, X, y));
    assert.equal(r.artifact.training.numRows, 1000);
    assert.equal(r.artifact.training.options.numRounds, 30);
    assert.equal(r.predictor.quantile, 0.9);
    assert.ok(r.trainPinball > 0 && r.seconds >= 0);
    assert.deepEqual(r.warnings, []);
    const high = train({ featureNames: names, X, y, quantile: 0.99, model: { kind: 'constant' }, provenance });
    assert.match(high.warnings[0]!, /only about 10 of 1000 rows lie above the 0.99 quantile/);
    const given = train({ featureNames: names, X, y, quantile: 0.9, model: { kind: 'constant' }, provenance: { ...provenance, dataSha256: 'given' } });
    assert.equal(given.artifact.provenance.dataSha256, 'given');
    assert.equal(given.importance, null);
  });

  it('hashes data by value: a changed target changes the hash', () => {
    const { X, y } = heteroscedastic(50, 3, 72);
    const h = datasetSha256(names, X, y);
    assert.equal(datasetSha256(names, X.map((r) => Float64Array.from(r)), Float64Array.from(y)), h);
    assert.notEqual(datasetSha256(names, X, y.map((v, i) => (i === 7 ? v + 1e-9 : v))), h);
  });

  it('names what is wrong with its input', () => {
    const { X, y } = heteroscedastic(100, 3, 73);
    const base = { X, y, quantile: 0.9, provenance };
    assert.throws(() => train({ ...base, featureNames: ['a', 'b'], model: { kind: 'constant' } }), /expected 3 feature names, got 2/);
    assert.throws(() => train({ ...base, featureNames: ['a', 'a', 'c'], model: { kind: 'constant' } }), /expected distinct feature names/);
    assert.throws(() => train({ ...base, featureNames: names, model: { kind: 'linear', columns: ['z'] } }), /expected linear columns among the feature names, got 'z'/);
    assert.throws(() => train({ ...base, featureNames: names, quantile: 0.999999 * 10, model: { kind: 'constant' } }), /expected quantile in \(0, 1\)/);
  });
});
