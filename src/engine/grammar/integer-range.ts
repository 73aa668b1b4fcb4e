// A GBNF expression matching exactly the canonical decimal integers in [lo, hi] (no leading
// zeros, no "-0"), for JSON Schema's minimum/maximum on integers. An open side stops at the
// grammar's longest integer (MAX_DIGITS digits), like the unbounded `integer` rule.
//
// Non-negative [a, b] splits by digit count; within one count, digit by digit (the classic
// range-to-regex construction): a shared leading digit, then the lower edge, a free middle, the
// upper edge. Its size is O(digits²) however wide the range, so zod's ±2^53 bounds cost nothing.
// BigInt throughout: bounds up to 16 digits exceed Number's exact integers.

export const MAX_DIGITS = 16;
const LARGEST = 10n ** BigInt(MAX_DIGITS) - 1n;

/** [lo, hi], either side open (null); lo ≤ hi. */
export function integerRange(lo: bigint | null, hi: bigint | null): string {
  const low = lo ?? -LARGEST;
  const high = hi ?? LARGEST;
  const parts: string[] = [];
  if (low < 0n) {
    // Negative numbers: "-" then the magnitudes [max(1, -high), -low].
    const magLo = high < 0n ? -high : 1n;
    parts.push(`"-" (${nonNegative(magLo, -low < LARGEST ? -low : LARGEST)})`);
  }
  if (high >= 0n) parts.push(nonNegative(low > 0n ? low : 0n, high < LARGEST ? high : LARGEST));
  return parts.length === 1 ? parts[0]! : parts.map((p) => `(${p})`).join(' | ');
}

/** Canonical decimals of [a, b], 0 ≤ a ≤ b. */
function nonNegative(a: bigint, b: bigint): string {
  const out: string[] = [];
  const la = String(a).length;
  const lb = String(b).length;
  for (let len = la; len <= lb; len++) {
    const from = len === la ? a : 10n ** BigInt(len - 1);
    const to = len === lb ? b : 10n ** BigInt(len) - 1n;
    out.push(sameLength(String(from), String(to)));
  }
  return out.join(' | ');
}

/** Digit strings of one length in [a, b] (a ≤ b). */
function sameLength(a: string, b: string): string {
  const n = a.length;
  if (n === 0) return '';
  if (n === 1) return digitClass(a, b);
  if (a[0] === b[0]) return `"${a[0]}" (${sameLength(a.slice(1), b.slice(1))})`;
  const rest = n - 1;
  const lowRest = a.slice(1);
  const highRest = b.slice(1);
  const any = `[0-9]{${rest}}`;
  // Whole first-digit blocks when the edges are full: [a0-b0] then anything.
  if (/^0*$/.test(lowRest) && /^9*$/.test(highRest)) return `${digitClass(a[0]!, b[0]!)} ${any}`;
  const alts: string[] = [`"${a[0]}" (${sameLength(lowRest, '9'.repeat(rest))})`];
  const d0 = Number(a[0]) + 1;
  const d1 = Number(b[0]) - 1;
  if (d0 <= d1) alts.push(`${digitClass(String(d0), String(d1))} ${any}`);
  alts.push(`"${b[0]}" (${sameLength('0'.repeat(rest), highRest)})`);
  return alts.join(' | ');
}

function digitClass(a: string, b: string): string {
  return a === b ? `"${a}"` : `[${a}-${b}]`;
}
