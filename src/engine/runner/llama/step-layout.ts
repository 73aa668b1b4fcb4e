// How the llama runner lays a plan's items out as batch rows, and where it cuts the step into
// separate llama_decode calls.
//
// Why cut: llama.cpp's CPU flash attention (ggml-cpu ops.cpp, the tiled kernel) runs a batch of
// 64 rows or more 64 query rows at a time, and skips a 64-cell KV tile only when the mask hides it
// from every row of the query tile. A decoding row in a prompt chunk's batch puts its sequence's
// whole context into the tile it shares with the chunk's first rows, and that tile walks it: a
// 256-row chunk beside one decoder at context 4,096 took 1.5-1.65x as long as the chunk alone, and
// the chunk followed by the decoder in a call of its own 0.98-1.10x (bench/native/mixed-cost.ts,
// docs/per-token.md §19). A batch under 64 rows runs a row-at-a-time kernel that skips masked
// cells one by one, so there the rows stay together. The order of rows inside one call does not
// help: a decoder placed last gets a query tile of its own, padded to 64 rows, and walks its
// context 64 times over just the same.
//
// Layout: the single-row items (decoding sequences, and prompts down to their last token) first,
// in plan order, then the multi-row items (prompt chunks), in plan order. Each group is one call.

/** Rows in the CPU flash-attention kernel's query tile (ggml-cpu GGML_FA_TILE_Q); batches of this many rows or more run through it. */
export const FA_TILE_ROWS = 64;

export interface StepLayout {
  /** Indices into the plan's items in the order their rows are laid out. */
  readonly order: readonly number[];
  /** Row index where each llama_decode call ends (the last is the row count). */
  readonly segmentEnds: Int32Array;
}

/**
 * The split layout for items of these lengths, or null: one call, rows in plan order (a step
 * under 64 rows, or without both single rows and chunks). Allocates only for a step it cuts.
 */
export function splitLayout(lengths: readonly number[]): StepLayout | null {
  let numSingle = 0;
  let numRows = 0;
  let numMulti = 0;
  for (const n of lengths) {
    numRows += n;
    if (n === 1) numSingle++;
    else if (n > 1) numMulti++;
  }
  if (numSingle === 0 || numMulti === 0 || numRows < FA_TILE_ROWS) return null;
  const order: number[] = [];
  lengths.forEach((n, i) => n === 1 && order.push(i));
  lengths.forEach((n, i) => n !== 1 && order.push(i));
  return { order, segmentEnds: Int32Array.of(numSingle, numRows) };
}
