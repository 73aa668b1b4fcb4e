// A first-in first-out queue over an array with a moving head: push, peek and shift are O(1)
// amortized (the consumed prefix is dropped once it is half the array). Entries are never removed
// from the middle; flow control marks them gone and skips them (lazy deletion).

export class Fifo<T> {
  #items: T[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(v: T): void {
    this.#items.push(v);
  }

  peek(): T | undefined {
    return this.#items[this.#head];
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const v = this.#items[this.#head++];
    if (this.#head * 2 >= this.#items.length && this.#head > 16) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return v;
  }

  /** The entries from the front (gone ones included: callers skip them). */
  *[Symbol.iterator](): Iterator<T> {
    for (let i = this.#head; i < this.#items.length; i++) yield this.#items[i]!;
  }

  /** Keep only the entries `keep` accepts (O(n); callers do it when gone entries outnumber live ones). */
  retain(keep: (v: T) => boolean): void {
    this.#items = this.#items.slice(this.#head).filter(keep);
    this.#head = 0;
  }
}
