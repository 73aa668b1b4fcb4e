// A single-consumer async queue: the engine pushes events from its step loop (synchronously, never
// waiting), one consumer drains them with `for await`. Ends after `end()` once drained. O(1) push
// and pop (head index, compacted when half consumed).

import { bug } from '../util/bug.ts';

export class EventQueue<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #head = 0;
  #ended = false;
  #wake: (() => void) | null = null;

  push(item: T): void {
    if (this.#ended) bug('push after end');
    this.#items.push(item);
    this.#notify();
  }

  end(): void {
    this.#ended = true;
    this.#notify();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      while (this.#head < this.#items.length) {
        const item = this.#items[this.#head++]!;
        if (this.#head > 64 && this.#head * 2 > this.#items.length) {
          this.#items = this.#items.slice(this.#head);
          this.#head = 0;
        }
        yield item;
      }
      if (this.#ended) return;
      await new Promise<void>((r) => (this.#wake = r));
    }
  }

  #notify(): void {
    const w = this.#wake;
    this.#wake = null;
    w?.();
  }
}
