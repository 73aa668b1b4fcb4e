// Priority bands from the outside: `--priority-bands` (each band's share of the caps, lowest band
// first) and the `x-headroom-priority` header (an integer band, higher first). A request without
// the header is in the top band, so turning bands on never slows unmarked traffic: a client marks
// the work it can afford to lose (batch jobs, prefetch) with a lower band.

import { ApiError } from '../api/errors.ts';

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
  const v = (Array.isArray(header) ? header.join(',') : header).trim();
  const n = Number(v);
  if (v === '' || !Number.isInteger(n) || n < 0 || n >= numBands) {
    throw new ApiError('invalid_value', `${PRIORITY_HEADER} must be an integer from 0 to ${numBands - 1} (higher first); got '${v.slice(0, 40)}'.`, { param: PRIORITY_HEADER });
  }
  return n;
}
