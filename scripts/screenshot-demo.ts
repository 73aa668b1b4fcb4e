// Regenerates docs/img/demo.png: runs `headroom demo` (by default on the real tiny llama model, one
// thread per engine) for a shortened load, waits until every request is answered, saves the page
// with headless Chromium and prints what each engine did (the numbers docs/demo.md quotes).
// Needs the llama addon (npm install) and Debian's `chromium` (or CHROMIUM=path). About three
// minutes: engine start, the 20 s capacity probe, --duration-s of load (default 110), the unmanaged engine's last clients
// giving up (--timeout-s, 20).
//
//   node --import tsx scripts/screenshot-demo.ts [--out docs/img/demo.png] [demo flags ...]

import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { bodyAttribute, dumpDom, findChromium, screenshot } from '../test/helpers/chromium.ts';
import { spawnHeadroom } from '../test/helpers/serve-process.ts';

const argv = process.argv.slice(2);
const outAt = argv.indexOf('--out');
const out = outAt >= 0 ? (argv[outAt + 1] ?? 'docs/img/demo.png') : 'docs/img/demo.png';
const flags = outAt >= 0 ? [...argv.slice(0, outAt), ...argv.slice(outAt + 2)] : argv;
const bin = await findChromium();
if (bin === null) {
  console.error('screenshot-demo: no chromium binary (apt-get install chromium, or set CHROMIUM)');
  process.exit(1);
}
const args = ['demo', '--port', '0', '--duration-s', '110', ...flags];
console.log(`screenshot-demo: headroom ${args.join(' ')}`);
const demo = spawnHeadroom(args);
try {
  const url = (await demo.waitFor(/open (http:\/\/\S+)/, 180_000))[1] ?? '';
  await demo.waitFor(/load finished/, 600_000);
  const dom = await dumpDom(bin, url, { budgetMs: 3000 });
  const status = bodyAttribute(dom, 'data-status');
  if (status !== 'drawn') throw new Error(`the page did not draw (data-status ${status})`);
  mkdirSync(dirname(out), { recursive: true });
  await screenshot(bin, url, out, { width: 1290, height: 1180, budgetMs: 3000 });
  const data = (await (await fetch(new URL('/demo/data', url))).json()) as { sides: { name: string; client: Record<string, unknown> }[] };
  for (const s of data.sides) {
    const { series: _series, ...numbers } = s.client;
    console.log(`${s.name}: ${JSON.stringify(numbers)}`);
  }
  console.log(demo.output().split('\n').filter((l) => l.startsWith('  admission')).join('\n'));
  console.log(`screenshot-demo: wrote ${out}`);
} finally {
  demo.proc.kill('SIGTERM');
  await demo.exited;
}
