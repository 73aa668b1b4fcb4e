// Prompt text of an approximately known token count, without knowing the server's tokenizer.
//
// Heuristic: the text is made of short, common lower-case English words separated by single
// spaces. In the BPE and SentencePiece vocabularies of mainstream models (Llama, Qwen, GPT-2/4,
// Mistral) each such word with its leading space is one token, so N words ≈ N tokens (within a
// few percent; punctuation every ~12 words adds a token each). Byte-level or byte-fallback
// tokenizers without these words in their vocabulary (Headroom's random-weight test models) will
// count more, up to one token per byte. The harness therefore records both its estimate
// (`prompt_tokens_est`) and the server's `usage.prompt_tokens`, and `--tokens-per-word` rescales
// the estimate once a calibration run has measured the ratio.
import type { Rng } from '../util/rng.ts';

const WORDS = (
  'the of and to in is it you that he was for on are as with his they at be this have from or one had ' +
  'by word but not what all were we when your can said there use an each which she do how their if will ' +
  'up other about out many then them these so some her would make like him into time has look two more ' +
  'write go see number no way could people my than first water been call who its now find long down day ' +
  'did get come made may part over new sound take only little work know place year live me back give most ' +
  'very after thing our just name good man think say great where help through much before line right too ' +
  'mean old any same tell boy follow came want show also around form three small set put end does another ' +
  'well large must big even such because turn here why ask went men read need land different home us move ' +
  'try kind hand picture again change off play spell air away animal house point page letter mother answer ' +
  'found study still learn should world high every near add food between own below country plant last school'
).split(' ');

/** Words (≈ tokens) of seeded filler text, with a full stop every 12 words for realism. */
export function promptText(rng: Rng, numWords: number): string {
  const parts: string[] = [];
  for (let i = 0; i < numWords; i++) {
    const w = WORDS[rng.int(WORDS.length)] ?? 'the';
    parts.push(i % 12 === 11 ? `${w}.` : w);
  }
  return parts.join(' ');
}

/** Words to emit for a target token count, given a measured tokens-per-word ratio. */
export function wordsForTokens(numTokens: number, tokensPerWord: number): number {
  return Math.max(1, Math.round(numTokens / tokensPerWord));
}
