// A counting gate: at most `limit` tasks run at once, the rest wait in arrival order.
//
// Why: tokenization and llama_decode share libuv's thread pool (4 threads by default). Without a
// bound, a burst of large prompts could take every pool thread and stall the step loop; with at
// most 2 tokenizations at once a decode always finds a thread.
export class Gate {
  readonly #limit: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];
  readonly #all = new Set<Promise<unknown>>();

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new Error(`Gate: expected limit to be an integer ≥ 1, got ${limit}`);
    this.#limit = limit;
  }

  /** Runs `task` when a slot is free. */
  run<T>(task: () => Promise<T>): Promise<T> {
    const p = this.#acquire().then(async () => {
      try {
        return await task();
      } finally {
        this.#release();
      }
    });
    this.#all.add(p);
    void p.catch(() => undefined).finally(() => this.#all.delete(p));
    return p;
  }

  /** Resolves once every task handed to run() so far has settled. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#all]);
  }

  #acquire(): Promise<void> {
    if (this.#running < this.#limit) {
      this.#running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #release(): void {
    const next = this.#waiting.shift();
    if (next === undefined) this.#running--;
    else next();
  }
}
