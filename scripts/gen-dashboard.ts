// Writes the Grafana dashboard (deploy/grafana/dashboards/headroom.json) from src/obs/dashboard.ts,
// after checking every PromQL query against the metrics a Headroom server registers.
//
//   node --import tsx scripts/gen-dashboard.ts [--slo-ms 10000] [--check]
//
// --check writes nothing and exits 1 when the committed file differs from what would be generated.

import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_SERVER_CONFIG } from '../src/api/config.ts';
import { renderDashboard } from '../src/obs/dashboard.ts';

export const DASHBOARD_PATH = join(dirname(fileURLToPath(import.meta.url)), '..', 'deploy', 'grafana', 'dashboards', 'headroom.json');

const { values } = parseArgs({ options: { 'slo-ms': { type: 'string', default: String(DEFAULT_SERVER_CONFIG.sloMs) }, check: { type: 'boolean', default: false } } });
const sloMs = Number(values['slo-ms']);
if (!(Number.isInteger(sloMs) && sloMs > 0)) throw new Error(`--slo-ms: expected a positive integer, got '${values['slo-ms']}'`);
const text = renderDashboard(sloMs);
if (values.check) {
  const committed = readFileSync(DASHBOARD_PATH, 'utf8');
  if (committed !== text) {
    console.error('gen-dashboard: deploy/grafana/dashboards/headroom.json is stale; run scripts/gen-dashboard.ts');
    process.exit(1);
  }
  console.log('gen-dashboard: up to date');
} else {
  writeFileSync(DASHBOARD_PATH, text);
  console.log(`gen-dashboard: wrote deploy/grafana/dashboards/headroom.json (${sloMs} ms SLO)`);
}
