// What a result folder records about where it came from: the harness source hash, the git
// commit, and a probe of the machine, so a number can be traced back and compared honestly.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));

export interface SourceInfo {
  /** sha256 over the harness's own source files (src/harness/*.ts), in name order. */
  bench_sha256: string;
  /** git HEAD of the checkout, or null outside git. */
  git_head: string | null;
  /** True when the working tree had uncommitted changes under src/harness. */
  git_dirty: boolean | null;
}

export function sourceInfo(): SourceInfo {
  const h = createHash('sha256');
  for (const f of readdirSync(BENCH_DIR).filter((f) => f.endsWith('.ts')).sort()) {
    h.update(f);
    h.update(readFileSync(path.join(BENCH_DIR, f)));
  }
  let head: string | null = null;
  let dirty: boolean | null = null;
  try {
    head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: BENCH_DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    dirty =
      execFileSync('git', ['status', '--porcelain', '--', '.'], { cwd: BENCH_DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== '';
  } catch {
    // not a git checkout
  }
  return { bench_sha256: h.digest('hex'), git_head: head, git_dirty: dirty };
}

export function machineProbe(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    platform: `${os.platform()} ${os.release()}`,
    arch: os.arch(),
    cpu_model: cpus[0]?.model ?? 'unknown',
    num_cpus: cpus.length,
    loadavg_1m_5m_15m: os.loadavg(),
    total_mem_bytes: os.totalmem(),
    node: process.version,
    hostname_hash: createHash('sha256').update(os.hostname()).digest('hex').slice(0, 12),
  };
}
