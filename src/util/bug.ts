// The one way Headroom reports a bug: a broken invariant or an impossible state throws a BugError
// whose message starts with "bug: " and names where it was found. Expected conditions (no free
// blocks, a refused request) are values, never this.

export class BugError extends Error {
  constructor(message: string) {
    super(`bug: ${message}`);
    this.name = 'BugError';
  }
}

/** Throw a BugError: `bug('BlockPool: block 3 is on the free list twice')`. */
export function bug(message: string): never {
  throw new BugError(message);
}
