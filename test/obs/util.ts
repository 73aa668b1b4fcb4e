// Small helpers for the obs tests: send a completion, scrape /metrics, read one sample.

export interface Completion {
  readonly status: number;
  /** Client-side wall time of the whole request, s. */
  readonly seconds: number;
}

export async function complete(url: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Completion> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'headroom-mock', ...body }),
  });
  await res.arrayBuffer();
  return { status: res.status, seconds: (performance.now() - t0) / 1000 };
}

export async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return res.text();
}

/** The value of the sample `name{labels}` (labels matched exactly as written, in order), or null. */
export function sample(text: string, name: string, labels = ''): number | null {
  const key = labels === '' ? name : `${name}{${labels}}`;
  for (const line of text.split('\n')) {
    if (line.startsWith(key + ' ')) return Number(line.slice(key.length + 1));
  }
  return null;
}

/** Runs `n` jobs with at most `concurrency` in flight. */
export async function pool<T>(n: number, concurrency: number, job: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array<T>(n);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      const i = next++;
      out[i] = await job(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  return out;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
