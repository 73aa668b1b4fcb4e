// OnePerTurn: runs synchronous jobs one per turn of the event loop, in the order they were given.
//
// Why: a large request body's decode and JSON.parse cannot be split, and several bodies arriving
// together would otherwise be parsed back to back in one turn (three 1 MB bodies: ~60 ms on a slow
// 2-core machine), while /health, new connections and every stream's next token wait. Run through
// here, each job starts from its own setImmediate, scheduled only after the previous job ended: an
// immediate queued while the check phase runs waits for the next turn, so the poll phase (sockets,
// /health) runs between any two jobs.
//
// Invariant: a job that throws does not stop the ones after it; its error is its own to catch
// (thrown here, it would reach the process as an uncaught exception).

export class OnePerTurn {
  #tail: Promise<void> = Promise.resolve();
  #pending = 0;

  /** Jobs given and not yet run. */
  get pending(): number {
    return this.#pending;
  }

  run(job: () => void): void {
    this.#pending++;
    this.#tail = this.#tail.then(
      () =>
        new Promise<void>((resolve) => {
          setImmediate(() => {
            this.#pending--;
            try {
              job();
            } finally {
              resolve();
            }
          });
        }),
    );
  }
}

/** Bodies at least this large are parsed through OnePerTurn; smaller ones at once (they parse in well under a millisecond). */
export const LARGE_BODY_BYTES = 64 * 1024;
