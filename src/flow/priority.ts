// Priority bands from the outside: `--priority-bands` (each band's share of the caps, lowest band
// first) and the `x-headroom-priority` header (an integer band, higher first). A request without
// the header is in the top band, so turning bands on never slows unmarked traffic: a client marks
// the work it can afford to lose (batch jobs, prefetch) with a lower band.

import { RequestError } from '../util/request-error.ts';

export const PRIORITY_HEADER = 'x-headroom-priority';

/** `0.5,0.8,1` → [0.5, 0.8, 1] (validated by the flow core). */
export function parseBandShares(text: string): number[] {
  const parts = text.split(',').map((s) => s.trim());
  const shares = parts.map(Number);
  if (parts.some((p) => p === '') || shares.some((s) => !Number.isFinite(s))) throw new Error(`--priority-bands: expected comma-separated shares like 0.5,0.8,1, got '${text}'`);
  return shares;
}

/** The band a header asks for: absent → the top band; an integer in [0, numBands − 1]; else a 400. */
export function bandOf(header: string | string[] | undefined, numBands: number): number {
  if (header === undefined) return numBands - 1;
  const n = parseBand(header);
  if (n >= numBands) throw badBand(header, `from 0 to ${numBands - 1}`);
  return n;
}

/**
 * The band number a present header names, whatever bands exist: decimal digits only (no sign,
 * exponent, hex or spaces inside), else a 400. Without flow control the number is then ignored.
 */
export function parseBand(header: string | string[]): number {
  const v = (Array.isArray(header) ? header.join(',') : header).trim();
  if (!/^[0-9]{1,9}$/.test(v)) throw badBand(header, 'a whole number from 0');
  return Number(v);
}

function badBand(header: string | string[], range: string): RequestError {
  const v = (Array.isArray(header) ? header.join(',') : header).trim();
  return new RequestError('invalid_value', `${PRIORITY_HEADER} must be an integer ${range} (higher first); got '${v.slice(0, 40)}'.`, { param: PRIORITY_HEADER });
}
