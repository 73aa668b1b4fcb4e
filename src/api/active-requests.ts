// The generation requests the API is serving right now, so a drain deadline can end them all:
// each registers a `cut` callback that finishes its response with an error (a final SSE error
// event and [DONE] for a stream) and aborts its engine request. Registration ends with the response.
export type Cut = (message: string) => void;

export class ActiveRequests {
  readonly #cuts = new Set<Cut>();

  /** Track one request; call the returned function when its response is over. */
  add(cut: Cut): () => void {
    this.#cuts.add(cut);
    return () => this.#cuts.delete(cut);
  }

  get size(): number {
    return this.#cuts.size;
  }

  /** Cut every tracked request; returns how many there were. */
  cutAll(message: string): number {
    const cuts = [...this.#cuts];
    this.#cuts.clear();
    for (const cut of cuts) cut(message);
    return cuts.length;
  }
}
