// Special-token-dense prompts: the addon's linear tokenizer against llama.cpp's own llama_tokenize
// on the same text, per vocabulary (llama.cpp's vocab-only GGUFs as micro models). The text is
// `<special>a` repeated to 700 KB (about 65k special tokens), the input that made llama_tokenize's
// special-token split quadratic. Runs interleaved, median of --runs with the range.
//
//   node --import tsx bench/tokenizer/special-dense.ts [--kb 700] [--runs 3] [--vocabs qwen2,llama-bpe,...]
//
// Writes one JSON line per vocabulary to stdout (ms for each, their ratio, token counts equal).
import { loadLlamaAddon, llamaBinsDir } from '../../src/engine/runner/llama/addon.ts';
import { realVocabModel } from '../../test/helpers/real-vocab.ts';

const SPECIAL: Readonly<Record<string, string>> = { qwen2: '<|im_end|>', 'llama-bpe': '<|eot_id|>', 'phi-3': '<|end|>', 'gemma-4': '<turn|>', 'llama-spm': '</s>' };

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : dflt;
}

const kb = Number(arg('kb', '700'));
const runs = Number(arg('runs', '3'));
const vocabs = arg('vocabs', Object.keys(SPECIAL).join(',')).split(',');
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const addon = loadLlamaAddon();
for (const vocab of vocabs) {
  const special = SPECIAL[vocab];
  if (special === undefined) throw new Error(`unknown vocabulary ${vocab}; one of ${Object.keys(SPECIAL).join(', ')}`);
  const ctx = new addon.HeadroomLlama({ modelPath: realVocabModel(vocab), binsDir: llamaBinsDir(), nCtx: 256, nCtxMax: 256, nSeqMax: 1, nBatch: 64, nUbatch: 64, threads: 1, threadsBatch: 1, verbose: false });
  const unit = `${special}a`;
  const text = unit.repeat(Math.ceil((kb * 1024) / unit.length));
  const fast: number[] = [];
  const reference: number[] = [];
  let equal = true;
  for (let i = 0; i < runs; i++) {
    let t0 = performance.now();
    const a = ctx.tokenize(text, true, true);
    fast.push(performance.now() - t0);
    t0 = performance.now();
    const b = ctx.tokenize(text, true, true, true);
    reference.push(performance.now() - t0);
    equal &&= a.length === b.length && a.every((t, j) => t === b[j]);
  }
  const info = ctx.info();
  process.stdout.write(
    `${JSON.stringify({ vocab, kb, runs, tokenizerPath: info.tokenizerPath, specialSplit: info.specialSplit, headroomMs: { median: median(fast), min: Math.min(...fast), max: Math.max(...fast) }, llamaTokenizeMs: { median: median(reference), min: Math.min(...reference), max: Math.max(...reference) }, ratio: median(reference) / median(fast), equal })}\n`,
  );
  ctx.close();
}

// Lanes: a 5-token chat alone, and sent right behind two of these prompts (qwen2 with its template),
// through the runner's tokenizer (two lanes: small prompts never queue behind large ones).
{
  const { LlamaRunner } = await import('../../src/engine/runner/llama/llama-runner.ts');
  const runner = new LlamaRunner({ modelPath: realVocabModel('qwen2', 'Qwen-Qwen2.5-7B-Instruct'), threads: 1, maxSequences: 2, contextTokens: 512 });
  const big = '<|im_end|>a'.repeat(Math.ceil((kb * 1024) / 11));
  const small = { messages: [{ role: 'user', content: 'hello' }] };
  const alone: number[] = [];
  const behind: number[] = [];
  for (let i = 0; i < runs * 2; i++) {
    let t0 = performance.now();
    await runner.tokenizer.encodeChat(small);
    alone.push(performance.now() - t0);
    const large = [runner.tokenizer.encodeText(big, true), runner.tokenizer.encodeText(big, true)];
    t0 = performance.now();
    await runner.tokenizer.encodeChat(small);
    behind.push(performance.now() - t0);
    await Promise.all(large);
  }
  process.stdout.write(`${JSON.stringify({ lanes: 'qwen2 5-token chat', kb, aloneMs: { median: median(alone), max: Math.max(...alone) }, behindTwoLargeMs: { median: median(behind), max: Math.max(...behind) } })}\n`);
  await runner.close();
}
