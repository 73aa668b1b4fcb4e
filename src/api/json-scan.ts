// The length of one top-level array in a JSON body, read from the bytes without building any
// objects: one pass, O(bytes), no allocation but the key names it compares. The API uses it to
// refuse a chat body of too many messages before JSON.parse, whose cost on 30,000 small objects
// (tens of ms of allocation and GC on the event loop) is itself a freeze.
//
// It does not validate: on malformed JSON the answer may be anything, or null; a body it counts
// wrongly is malformed and is refused by JSON.parse anyway. Duplicate keys: the last wins, as in
// JSON.parse.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** Number of elements of `body[key]` when the body is an object whose `key` is an array; else null. */
export function topLevelArrayLength(body: Uint8Array, key: string): number | null {
  const keyBytes = Buffer.from(key, 'utf8');
  let depth = 0;
  let inString = false;
  let escaped = false;
  let expectKey = false; // the next string at depth 1 is a key
  let keyStart = -1; // where the key being read started
  let keyMatched = false; // the last key at depth 1 was `key`
  let afterColon = false; // its value comes next
  let counting = false; // inside body[key]
  let commas = 0;
  let nonEmpty = false;
  let result: number | null = null;
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (c === BACKSLASH) escaped = true;
      else if (c === QUOTE) {
        inString = false;
        if (keyStart >= 0) {
          keyMatched = i - keyStart === keyBytes.length && keyBytes.equals(body.subarray(keyStart, i));
          keyStart = -1;
        }
      }
      continue;
    }
    if (isSpace(c)) continue;
    if (counting && depth === 2 && c !== CLOSE_ARRAY) nonEmpty = true;
    switch (c) {
      case QUOTE:
        inString = true;
        if (depth === 1 && expectKey) {
          keyStart = i + 1;
          expectKey = false;
        }
        afterColon = false;
        break;
      case OPEN_OBJECT:
      case OPEN_ARRAY:
        if (depth === 1 && afterColon && keyMatched && c === OPEN_ARRAY) {
          counting = true;
          commas = 0;
          nonEmpty = false;
        }
        if (depth === 0 && c === OPEN_OBJECT) expectKey = true;
        afterColon = false;
        depth++;
        break;
      case CLOSE_OBJECT:
      case CLOSE_ARRAY:
        depth--;
        if (counting && depth === 1) {
          result = nonEmpty ? commas + 1 : 0;
          counting = false;
        }
        if (depth < 0) return null;
        break;
      case COMMA:
        if (depth === 1) {
          expectKey = true;
          keyMatched = false;
        } else if (counting && depth === 2) {
          commas++;
        }
        afterColon = false;
        break;
      case COLON:
        afterColon = depth === 1;
        break;
      default:
        afterColon = false;
    }
  }
  return result;
}
