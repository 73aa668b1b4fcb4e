// Headless Chromium (Debian's `chromium` package) without a driver library: one process per page,
// `--dump-dom` for what the page drew and `--screenshot` for a PNG. `--virtual-time-budget` lets
// the page's fetches and timers run to quiet (up to that much page time) before either is taken.
// Each run gets a fresh profile folder, so parallel runs never share a profile lock.

import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const CANDIDATES = ['chromium', 'chromium-browser', 'google-chrome'];

/** The browser binary (CHROMIUM overrides), or null when none is installed. */
export async function findChromium(): Promise<string | null> {
  const env = process.env['CHROMIUM'];
  for (const bin of env === undefined || env === '' ? CANDIDATES : [env]) {
    try {
      await run(bin, ['--version'], { timeout: 30_000 });
      return bin;
    } catch {
      // not this one
    }
  }
  return null;
}

/**
 * The browser binary for a test that needs one; null (and why, for the caller to skip or note)
 * where none is installed. Under CI (`CI=true`, as .ci/run sets) a missing browser fails instead:
 * .ci/run installs it, so its absence there is a broken install, not a reason to skip.
 */
export async function chromiumForTest(): Promise<{ bin: string } | { bin: null; why: string }> {
  const bin = await findChromium();
  if (bin !== null) return { bin };
  const why = 'no `chromium` binary is installed (apt-get install chromium; .ci/run does this)';
  if (process.env['CI'] === 'true') throw new Error(why);
  return { bin: null, why };
}

export interface PageOptions {
  /** Page time the browser may run before the DOM or screenshot is taken, ms (default 5000). */
  readonly budgetMs?: number;
  readonly width?: number;
  readonly height?: number;
}

async function chromium(bin: string, args: readonly string[], opts: PageOptions): Promise<string> {
  const profile = mkdtempSync(join(tmpdir(), 'headroom-chromium-'));
  try {
    const { stdout } = await run(
      bin,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        '--hide-scrollbars',
        `--user-data-dir=${profile}`,
        `--virtual-time-budget=${opts.budgetMs ?? 5000}`,
        `--window-size=${opts.width ?? 1280},${opts.height ?? 1100}`,
        ...args,
      ],
      { timeout: 90_000, maxBuffer: 64 * 1024 * 1024 },
    );
    return stdout;
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

/** The page's DOM (serialised HTML) after its scripts ran. */
export function dumpDom(bin: string, url: string, opts: PageOptions = {}): Promise<string> {
  return chromium(bin, ['--dump-dom', url], opts);
}

/** A PNG of the page, written to `file`. */
export async function screenshot(bin: string, url: string, file: string, opts: PageOptions = {}): Promise<void> {
  await chromium(bin, [`--screenshot=${file}`, url], opts);
}

/** An attribute of <body> in a dumped DOM (null when absent). */
export function bodyAttribute(dom: string, name: string): string | null {
  const body = /<body\b[^>]*>/.exec(dom)?.[0] ?? '';
  return new RegExp(`\\b${name}="([^"]*)"`).exec(body)?.[1] ?? null;
}

/** How many elements in a dumped DOM carry `class="name"` exactly. */
export function countClass(dom: string, name: string): number {
  return dom.split(`class="${name}"`).length - 1;
}
