// Where response ids come from: random in production, sequential in tests and replay.

import { randomBytes } from 'node:crypto';

export interface IdSource {
  /** A fresh id with this prefix (`chatcmpl`, `cmpl`). */
  next(prefix: string): string;
  /** A fresh 32-bit seed for a request that did not give one. */
  seed(): number;
}

export const randomIds: IdSource = {
  next: (prefix) => `${prefix}-${randomBytes(12).toString('hex')}`,
  seed: () => randomBytes(4).readUInt32LE(),
};

export function sequentialIds(start = 0): IdSource {
  let n = start;
  return { next: (prefix) => `${prefix}-${(n++).toString().padStart(8, '0')}`, seed: () => n++ };
}
