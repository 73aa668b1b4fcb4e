// The gateway alone in front of the stub upstream for minutes, not seconds: open loop at --rate
// streaming requests/s for --seconds, TTFT (intended send to the first body chunk) reported per
// 30 s window, so that what a short run cannot show — how often the gateway's full garbage
// collections come once its heap has grown — shows. --node-args go to the gateway's node (given with
// '='), e.g. '--initial-old-space-size=256' or '--import=./bench/gateway/gc-preload.mjs' (DIAG_OUT).
//
//   node --import tsx bench/gateway/steady.ts [--rate 500] [--seconds 240] [--node-args='...']
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { openLoop } from './open-loop.ts';

const { values } = parseArgs({ options: { rate: { type: 'string', default: '500' }, seconds: { type: 'string', default: '240' }, 'node-args': { type: 'string', default: '' } } });
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const WINDOW_S = 30;
const PORT = 8361;
const children: ChildProcess[] = [];
process.on('exit', () => children.forEach((c) => c.kill('SIGTERM')));

const stub = spawn(process.execPath, ['--import', 'tsx', 'bench/gateway/stub-server.ts'], { stdio: ['ignore', 'pipe', 'inherit'] });
children.push(stub);
const stubUrl = await new Promise<string>((resolve) => createInterface({ input: stub.stdout }).once('line', resolve));
const nodeArgs = values['node-args'].split(/\s+/).filter((a) => a !== '');
children.push(spawn(process.execPath, [...nodeArgs, 'bin/headroom.mjs', 'gateway', '--upstream', stubUrl, '--host', '127.0.0.1', '--port', String(PORT), '--log-level', 'warn'], { stdio: 'inherit' }));
const base = `http://127.0.0.1:${PORT}`;
for (let i = 0; ; i++) {
  if (i > 300) throw new Error('the gateway never became ready');
  if (await fetch(`${base}/ready`).then((r) => r.ok, () => false)) break;
  await new Promise((r) => setTimeout(r, 100));
}

const pool = new Pool(base, { connections: 64 });
const total = RATE * SECONDS;
const ttft = new Array<number>(total).fill(NaN);
const errors = await openLoop(pool, RATE, total, (i, ms) => {
  ttft[i] = ms;
});
await pool.close();
const per = RATE * WINDOW_S;
console.log(`${RATE} req/s for ${SECONDS} s, gateway node args: ${nodeArgs.join(' ') || '(none)'}; errors ${errors}`);
console.log('| window | TTFT p50 ms | TTFT p99 ms |\n|---|---|---|');
for (let i = 0; i < total; i += per) {
  const w = ttft.slice(i, i + per).filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  console.log(`| ${(i / per) * WINDOW_S}–${(i / per + 1) * WINDOW_S} s | ${w[w.length >> 1]!.toFixed(2)} | ${w[Math.floor(0.99 * w.length)]!.toFixed(2)} |`);
}
process.exit(0);
