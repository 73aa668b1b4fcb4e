// The Grafana dashboard reads only metrics that exist: every PromQL expression in the committed
// JSON names registered series, and the committed file is what the generator writes today.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { DEFAULT_SERVER_CONFIG } from '../../src/api/config.ts';
import { checkDashboard, dashboardExprs, registeredSeries, renderDashboard } from '../../src/obs/dashboard.ts';
import { promqlNames } from '../../src/obs/promql.ts';

const committedPath = new URL('../../deploy/grafana/dashboards/headroom.json', import.meta.url);

test('every query in the committed dashboard names a registered metric', () => {
  const dash = JSON.parse(readFileSync(committedPath, 'utf8')) as unknown;
  const exprs = dashboardExprs(dash);
  assert.ok(exprs.length >= 20, `only ${exprs.length} queries`);
  assert.deepEqual(checkDashboard(dash, registeredSeries(DEFAULT_SERVER_CONFIG.sloMs)), []);
});

test('the committed dashboard is what scripts/gen-dashboard.ts generates', () => {
  assert.equal(readFileSync(committedPath, 'utf8'), renderDashboard(DEFAULT_SERVER_CONFIG.sloMs), 'stale: run node --import tsx scripts/gen-dashboard.ts');
});

test('the check catches an unregistered metric, a histogram without its suffix, an unknown function', () => {
  const reg = registeredSeries(4000);
  const bad = (expr: string): string[] => checkDashboard({ panels: [{ targets: [{ expr }] }] }, reg);
  assert.deepEqual(bad('sum(rate(headroom_requests_total[1m]))'), []);
  assert.deepEqual(bad('histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{model_name="m"}[$__rate_interval])))'), []);
  assert.match(bad('sum(rate(headroom_request_total[1m]))').join(), /unregistered metric 'headroom_request_total'/);
  assert.match(bad('rate(headroom_time_to_first_token_seconds[1m])').join(), /unregistered metric 'headroom_time_to_first_token_seconds'/);
  assert.match(bad('histogram_quantil(0.9, headroom_e2e_request_latency_seconds_bucket)').join(), /unknown function 'histogram_quantil'/);
});

test('promqlNames skips labels, strings, ranges, grouping, keywords and numbers', () => {
  const { series, unknownFunctions } = promqlNames('sum by (outcome, le) (rate(a_total{x="b_total", y=~"c|d"}[5m] offset 1h)) / on(le) group_left clamp_min(vllm:b_count, 1e-9) > bool 0.5');
  assert.deepEqual(series, ['a_total', 'vllm:b_count']);
  assert.deepEqual(unknownFunctions, []);
});
