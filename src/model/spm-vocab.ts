// A byte-fallback SentencePiece (SPM) vocabulary, built deterministically without any data set.
//
// Order (ids): <unk>, <s>, </s>, the 256 byte tokens <0x00>…<0xFF> (type BYTE), the ChatML
// control tokens <|im_start|> and <|im_end|>, then word pieces. SPM marks a space with "▁"
// (U+2581) and merges adjacent pieces whose concatenation is in the vocabulary, highest score
// first; so every word piece comes with all its prefixes, and any character not in the vocabulary
// falls back to its UTF-8 bytes. Scores fall with the id (earlier = more common).

import { bug } from '../util/bug.ts';

/** llama.cpp token types. */
export const TokenType = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, BYTE: 6 } as const;

export interface SpmVocab {
  readonly tokens: readonly string[];
  readonly scores: Float32Array;
  readonly types: Int32Array;
  readonly unkId: number;
  readonly bosId: number;
  readonly eosId: number;
}

const SPACE = '\u2581';

// Common English words: enough that ordinary prompts tokenize into word-sized pieces.
const WORDS = `the of and to a in is it you that he was for on are with as I his they be at one have this
from or had by hot word but what some we can out other were all there when up use your how said an each
she which do their time if will way about many then them write would like so these her long make thing
see him two has look more day could go come did number sound no most people my over know water than
call first who may down side been now find any new work part take get place made live where after back
little only round man year came show every good me give our under name very through just form sentence
great think say help low line differ turn cause much mean before move right boy old too same tell does
set three want air well also play small end put home read hand port large spell add even land here must
big high such follow act why ask men change went light kind off need house picture try us again animal
point mother world near build self earth father head stand own page should country found answer school
grow study still learn plant cover food sun four between state keep eye never last let thought city tree
cross farm hard start might story saw far sea draw left late run while press close night real life few
north open seem together next white children begin got walk example ease paper group always music those
both mark often letter until mile river car feet care second book carry took science eat room friend
began idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl
usual young ready above ever red list though feel talk bird soon body dog family direct pose leave song
measure door product black short numeral class wind question happen complete ship area half rock order
fire south problem piece told knew pass since top whole king space heard best hour better true during
hundred five remember step early hold west ground interest reach fast verb sing listen six table travel
less morning ten simple several vowel toward war lay against pattern slow center love person money serve
appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry
dark machine note wait plan figure star box noun field rest correct able pound done beauty drive stood
contain front teach week final gave green oh quick develop ocean warm free minute strong special mind
behind clear tail produce fact street inch multiply nothing course stay wheel full force blue object
decide surface deep moon island foot system busy test record boat common gold possible plane stead dry
wonder laugh thousand ago ran check game shape equate miss brought heat snow tire bring yes distant fill
east paint language among model server request token latency budget queue cache prefix batch decode`.split(/\s+/);

const CONSONANTS = 'bcdfghjklmnprstvwz'.split('');
const VOWELS = 'aeiou'.split('');

/** Syllable strings in a fixed order: CV, VC, CVC, then CVCV, CVCVC, … (as many as asked for). */
function* syllables(): Generator<string> {
  for (const c of CONSONANTS) for (const v of VOWELS) yield c + v;
  for (const v of VOWELS) for (const c of CONSONANTS) yield v + c;
  for (const c of CONSONANTS) for (const v of VOWELS) for (const d of CONSONANTS) yield c + v + d;
  for (const c of CONSONANTS)
    for (const v of VOWELS)
      for (const d of CONSONANTS) for (const w of VOWELS) yield c + v + d + w;
  for (const c of CONSONANTS)
    for (const v of VOWELS)
      for (const d of CONSONANTS) for (const w of VOWELS) for (const e of CONSONANTS) yield c + v + d + w + e;
}

/** Builds a vocabulary of exactly `size` tokens (at least 512). */
export function buildSpmVocab(size: number): SpmVocab {
  if (!Number.isInteger(size) || size < 512) throw new Error(`vocab size: expected an integer >= 512, got ${size}`);
  const tokens: string[] = [];
  const types: number[] = [];
  const seen = new Set<string>();
  const add = (text: string, type: number): void => {
    if (tokens.length >= size || seen.has(text)) return;
    seen.add(text);
    tokens.push(text);
    types.push(type);
  };
  add('<unk>', TokenType.UNKNOWN);
  add('<s>', TokenType.CONTROL);
  add('</s>', TokenType.CONTROL);
  for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, TokenType.BYTE);
  add('<|im_start|>', TokenType.CONTROL);
  add('<|im_end|>', TokenType.CONTROL);
  // Every printable ASCII character, alone and after a space, so ASCII text never needs bytes.
  add(SPACE, TokenType.NORMAL);
  for (let c = 33; c < 127; c++) add(String.fromCharCode(c), TokenType.NORMAL);
  for (let c = 33; c < 127; c++) add(SPACE + String.fromCharCode(c), TokenType.NORMAL);
  add('\n', TokenType.NORMAL);
  const addWithPrefixes = (piece: string): void => {
    for (let i = 2; i <= piece.length; i++) add(piece.slice(0, i), TokenType.NORMAL);
  };
  for (const w of WORDS) {
    addWithPrefixes(SPACE + w);
    addWithPrefixes(w);
  }
  for (const w of WORDS) addWithPrefixes(SPACE + w[0]!.toUpperCase() + w.slice(1));
  for (const s of syllables()) {
    if (tokens.length >= size) break;
    addWithPrefixes(SPACE + s);
    addWithPrefixes(s);
  }
  if (tokens.length !== size) bug(`built ${tokens.length} tokens, wanted ${size}`);
  const scores = new Float32Array(size);
  for (let i = 0; i < size; i++) scores[i] = types[i] === TokenType.NORMAL ? -i : 0;
  return { tokens, scores, types: Int32Array.from(types), unkId: 0, bosId: 1, eosId: 2 };
}
