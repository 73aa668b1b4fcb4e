// Value parsers for commander options that take numbers: a bad value is commander's own usage
// error (exit 1, one line naming the flag), never a NaN that surfaces later.
import { InvalidArgumentError } from 'commander';

export const positive = (v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !(n > 0) || !Number.isFinite(n)) throw new InvalidArgumentError(`expected a positive number, got '${v}'`);
  return n;
};

export const positiveInt = (v: string): number => {
  const n = positive(v);
  if (!Number.isInteger(n)) throw new InvalidArgumentError(`expected a positive integer, got '${v}'`);
  return n;
};
