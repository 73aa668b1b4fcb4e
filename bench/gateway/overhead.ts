// The time to first token that gateway mode adds, against the upstream called directly, with nginx
// (Debian's package, a plain reverse proxy with buffering off) as the reference point. Streaming
// chat completions to the stub upstream (bench/gateway/stub-server.ts: four chunks at once, no
// model), open loop at --rate requests/s. The three arms — direct, gateway, nginx — run in turn in
// every round, the order rotated per round, so machine noise falls on all of them alike; each run
// starts with a second of warm-up that is not recorded.
//
// CPU: the gateway's process (and nginx's worker) CPU time over each of its runs, from
// /proc/<pid>/stat, divided by the requests sent: what one request costs the proxy, which is what
// sizes a gateway replica (how many requests per second one core forwards).
//
// TTFT is timed from the request's intended send time (the open-loop schedule) to the first body
// chunk holding `data:`, so a client or proxy that falls behind pays for it. "Added" is an arm's
// TTFT quantile minus the direct arm's in the same round; the table gives the median over rounds
// with [min, max].
//
// Two more arms. `node-floor` (node-floor.ts) is the least any Node proxy does — node:http in
// front, undici behind, bytes piped — so the gateway's cost splits into Node's (node-floor against
// nginx) and Headroom's own (gateway against node-floor). `--baseline DIR` adds `gateway-baseline`:
// the gateway of another checkout (DIR, with its node_modules installed), run in the same rounds,
// so a change is measured side by side with the code before it. Every proxy first serves
// --warmup-s of the same traffic, unrecorded: a fresh Node process needs thousands of requests to
// compile its hot paths, and without this the first round's gateway measured its start-up.
//
//   node --import tsx bench/gateway/overhead.ts [--rate 500] [--seconds 10] [--rounds 5] [--connections 64] [--out results/gateway/overhead]
//     [--warmup-s 10] [--baseline DIR] [--no-floor] [--client spin|sleep]   (sleep: the client waits on timers, see open-loop.ts)
//     [--gateway-node-args='--cpu-prof --cpu-prof-dir DIR']   (Node flags for the gateway's process, given with '=': a CPU profile of it)
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { openLoop } from './open-loop.ts';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '500' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '64' },
    out: { type: 'string', default: 'results/gateway/overhead' },
    'gateway-node-args': { type: 'string', default: '' },
    'warmup-s': { type: 'string', default: '10' },
    baseline: { type: 'string' },
    'no-floor': { type: 'boolean', default: false },
    client: { type: 'string', default: 'spin' },
  },
});
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const CONNECTIONS = Number(values.connections);
if (values.client !== 'spin' && values.client !== 'sleep') throw new Error(`--client: expected spin or sleep, got ${values.client}`);
/** How the client waits for its next arrival (open-loop.ts): spinning holds a core, sleeping sends up to ~1 ms late. */
const CLIENT: 'spin' | 'sleep' = values.client;
const WARMUP_S = 1;
const GATEWAY_PORT = 8341;
const NGINX_PORT = 8342;
const BASELINE_PORT = 8343;
const FLOOR_PORT = 8344;

const children: ChildProcess[] = [];
/** The proxy arms' processes, by arm name. */
const pids = new Map<string, number>();
const TICK_MS = 10; // USER_HZ is 100 on Linux

/** CPU time (user + system) a proxy arm's process has used so far, ms; for nginx, its worker's (the master's one child). */
function cpuMs(arm: string): number {
  let pid = pids.get(arm)!;
  if (arm === 'nginx') pid = Number(readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/)[0]);
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}
const tmp = mkdtempSync(path.join(os.tmpdir(), 'headroom-overhead-'));
function cleanup(): void {
  for (const c of children) c.kill('SIGTERM');
  rmSync(tmp, { recursive: true, force: true });
}
process.on('exit', cleanup);

/** Starts a process (recorded as `arm`'s, if given) and resolves with its first stdout line, or at once. */
function start(cmd: string, args: string[], firstLine: boolean, arm?: string, cwd?: string): Promise<string> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], ...(cwd === undefined ? {} : { cwd }) });
  children.push(child);
  if (arm !== undefined) pids.set(arm, child.pid!);
  if (!firstLine) return Promise.resolve('');
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`${cmd} exited with ${code}`)));
  });
}

async function waitFor(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} never answered`);
}

const stubUrl = await start(process.execPath, ['--import', 'tsx', 'bench/gateway/stub-server.ts'], true);
const stubPort = new URL(stubUrl).port;
const gatewayNodeArgs = values['gateway-node-args'].split(/\s+/).filter((a) => a !== '');
const gatewayArgs = (port: number): string[] => [...gatewayNodeArgs, 'bin/headroom.mjs', 'gateway', '--upstream', stubUrl, '--host', '127.0.0.1', '--port', String(port), '--log-level', 'warn'];
await start(process.execPath, gatewayArgs(GATEWAY_PORT), false, 'gateway');
if (values.baseline !== undefined) await start(process.execPath, gatewayArgs(BASELINE_PORT), false, 'gateway-baseline', path.resolve(values.baseline));
if (!values['no-floor']) await start(process.execPath, ['--import', 'tsx', 'bench/gateway/node-floor.ts', '--upstream', stubUrl, '--port', String(FLOOR_PORT)], false, 'node-floor');
writeFileSync(
  path.join(tmp, 'nginx.conf'),
  `daemon off;
worker_processes 1;
user root;
pid ${tmp}/nginx.pid;
error_log ${tmp}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${tmp}/body;
  proxy_temp_path ${tmp}/proxy;
  upstream stub { server 127.0.0.1:${stubPort}; keepalive 128; }
  server {
    listen 127.0.0.1:${NGINX_PORT};
    location / {
      proxy_pass http://stub;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
);
await start('nginx', ['-p', tmp, '-c', path.join(tmp, 'nginx.conf')], false, 'nginx');
await waitFor(`http://127.0.0.1:${GATEWAY_PORT}/ready`);
await waitFor(`http://127.0.0.1:${NGINX_PORT}/health`);

const arms: Record<string, string> = { direct: stubUrl, gateway: `http://127.0.0.1:${GATEWAY_PORT}` };
if (values.baseline !== undefined) {
  await waitFor(`http://127.0.0.1:${BASELINE_PORT}/ready`);
  arms['gateway-baseline'] = `http://127.0.0.1:${BASELINE_PORT}`;
}
if (!values['no-floor']) {
  await waitFor(`http://127.0.0.1:${FLOOR_PORT}/health`);
  arms['node-floor'] = `http://127.0.0.1:${FLOOR_PORT}`;
}
arms['nginx'] = `http://127.0.0.1:${NGINX_PORT}`;
type Arm = string;

interface RunResult {
  readonly ttftMs: number[];
  readonly errors: number;
  readonly sent: number;
  /** How late the client sent each recorded arrival, ms. */
  readonly slipMs: number[];
}

/** One open-loop run against `base`: `seconds` of arrivals at RATE, the first WARMUP_S not recorded. */
async function run(base: string, seconds: number): Promise<RunResult> {
  const pool = new Pool(base, { connections: CONNECTIONS, pipelining: 1 });
  const ttft: number[] = [];
  const slips: number[] = [];
  const total = Math.round(RATE * seconds);
  const errors = await openLoop(
    pool,
    RATE,
    total,
    (i, ms) => {
      if (i >= RATE * WARMUP_S) ttft.push(ms);
    },
    CLIENT,
    slips,
  );
  await pool.close();
  return { ttftMs: ttft, errors, sent: total, slipMs: slips.slice(Math.round(RATE * WARMUP_S)) };
}

const q = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};

const names = Object.keys(arms);
/** The baseline checkout's commit, for the report. */
function baselineRev(): string {
  return `commit ${execFileSync('git', ['-C', path.resolve(values.baseline!), 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()}`;
}
const WARMUP_ALL_S = Number(values['warmup-s']);
for (const arm of names) {
  if (arm === 'direct' || WARMUP_ALL_S <= 0) continue;
  const res = await run(arms[arm]!, WARMUP_ALL_S);
  process.stderr.write(`warm-up ${arm}: p50 ${q(res.ttftMs, 0.5).toFixed(2)} ms, p99 ${q(res.ttftMs, 0.99).toFixed(2)} ms\n`);
}
const rounds: Record<Arm, { p50: number; p99: number; n: number; errors: number; cpuMsPerRequest: number | null; slipP50: number; slipP99: number }>[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const row = {} as (typeof rounds)[number];
  for (let k = 0; k < names.length; k++) {
    const arm = names[(k + r) % names.length]!;
    const cpu0 = arm === 'direct' ? 0 : cpuMs(arm);
    const res = await run(arms[arm]!, SECONDS + WARMUP_S);
    const cpuMsPerRequest = arm === 'direct' ? null : (cpuMs(arm) - cpu0) / res.sent;
    row[arm] = { p50: q(res.ttftMs, 0.5), p99: q(res.ttftMs, 0.99), n: res.ttftMs.length, errors: res.errors, cpuMsPerRequest, slipP50: q(res.slipMs, 0.5), slipP99: q(res.slipMs, 0.99) };
    process.stderr.write(`round ${r} ${arm}: p50 ${row[arm].p50.toFixed(2)} ms, p99 ${row[arm].p99.toFixed(2)} ms, ${res.ttftMs.length} recorded, ${res.errors} errors\n`);
  }
  rounds.push(row);
}

const med = (xs: number[]): string => {
  const s = [...xs].sort((a, b) => a - b);
  return `${s[Math.floor(s.length / 2)]!.toFixed(2)} [${s[0]!.toFixed(2)}, ${s.at(-1)!.toFixed(2)}]`;
};
const lines = [
  '# TTFT added by gateway mode, a bare Node proxy and nginx over calling the upstream directly',
  '',
  `Generated by \`node --import tsx bench/gateway/overhead.ts --rate ${RATE} --seconds ${SECONDS} --rounds ${ROUNDS} --connections ${CONNECTIONS} --warmup-s ${WARMUP_ALL_S} --client ${CLIENT}${values.baseline === undefined ? '' : ' --baseline DIR'}${values['no-floor'] ? ' --no-floor' : ''}\`:`,
  `streaming chat completions to the stub upstream (four chunks at once), open loop at ${RATE} requests/s, ${SECONDS} s per arm per round after ${WARMUP_S} s`,
  `of warm-up, ${ROUNDS} rounds with the arm order rotated, every proxy first warmed with ${WARMUP_ALL_S} s of the same traffic; a client pool of ${CONNECTIONS}`,
  'keep-alive connections. TTFT runs from the intended send time to the first `data:` chunk. Each cell is the median over rounds [min, max], ms;',
  `"added" is the arm minus the direct arm in the same round. Arms: ${names.join(', ')}${values.baseline === undefined ? '' : ` (gateway-baseline: the gateway of ${baselineRev()})`}.`,
  `Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, Node ${process.version}; client, stub and proxies share it (nginx: one worker).`,
  '',
  `The client ${CLIENT === 'spin' ? 'spins between arrivals (one core held)' : 'sleeps on timers between arrivals'}; its lateness per arrival (send − intended) is in the last column, p50 / p99.`,
  '',
  '| arm | TTFT p50 | TTFT p99 | added p50 | added p99 | proxy CPU per request, ms | recorded per run | errors | client slip p50 / p99, ms |',
  '|---|---|---|---|---|---|---|---|---|',
];
for (const arm of names) {
  const p50 = rounds.map((r) => r[arm]!.p50);
  const p99 = rounds.map((r) => r[arm]!.p99);
  const a50 = rounds.map((r) => r[arm]!.p50 - r['direct']!.p50);
  const a99 = rounds.map((r) => r[arm]!.p99 - r['direct']!.p99);
  const cpu = rounds.map((r) => r[arm]!.cpuMsPerRequest).filter((v): v is number => v !== null);
  lines.push(`| ${arm} | ${med(p50)} | ${med(p99)} | ${arm === 'direct' ? '-' : med(a50)} | ${arm === 'direct' ? '-' : med(a99)} | ${cpu.length === 0 ? '-' : med(cpu)} | ${med(rounds.map((r) => r[arm]!.n)).replace(/\.00/g, '')} | ${rounds.reduce((s, r) => s + r[arm]!.errors, 0)} | ${med(rounds.map((r) => r[arm]!.slipP50)).split(' ')[0]} / ${med(rounds.map((r) => r[arm]!.slipP99)).split(' ')[0]} |`);
}
// The gateway against its references, paired by round: what Headroom adds over a bare Node proxy, and a change over its baseline.
const pairs = [['gateway', 'node-floor'], ['gateway', 'gateway-baseline'], ['node-floor', 'nginx']].filter(([a, b]) => names.includes(a!) && names.includes(b!));
if (pairs.length > 0) {
  lines.push('', 'Paired by round, median [min, max]:', '', '| arms | TTFT p50 difference, ms | TTFT p99 difference, ms | CPU per request ratio |', '|---|---|---|---|');
  for (const [a, b] of pairs as [string, string][]) {
    const d50 = rounds.map((r) => r[a]!.p50 - r[b]!.p50);
    const d99 = rounds.map((r) => r[a]!.p99 - r[b]!.p99);
    const cpu = rounds.map((r) => r[a]!.cpuMsPerRequest! / r[b]!.cpuMsPerRequest!);
    lines.push(`| ${a} − ${b} | ${med(d50)} | ${med(d99)} | ${med(cpu)} |`);
  }
}
mkdirSync(values.out, { recursive: true });
writeFileSync(path.join(values.out, 'rounds.json'), `${JSON.stringify({ rate: RATE, seconds: SECONDS, rounds, machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version, loadavg: os.loadavg() } }, null, 1)}\n`);
writeFileSync(path.join(values.out, 'README.md'), `${lines.join('\n')}\n`);
process.stdout.write(`${lines.join('\n')}\n`);
cleanup();
process.exit(0);
