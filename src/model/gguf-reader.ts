// Reads a GGUF file's metadata (v2 and v3, little-endian): every key with its type, its decoded
// value and the exact bytes of its value as stored, so a key can be copied into another file byte
// for byte (`model make --vocab-from`). Tensor infos and data are not read: the reader stops after
// the last key, so a multi-GB model costs a few MB of reads.
//
// Layout read: "GGUF" u32(version) u64(nTensors) u64(nKv) | kv* | ...
// A kv is: string key (u64 length + bytes), u32 type, value; an array value is u32 element type,
// u64 count, elements (nested arrays allowed).
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

/** GGUF metadata value types, as the format numbers them. */
export const GgufType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

const SCALAR_BYTES: Readonly<Record<number, number>> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

/** A decoded value: numbers (64-bit integers as bigint), booleans, strings, or arrays of them. */
export type GgufValue = number | bigint | boolean | string | readonly GgufValue[];

export interface GgufEntry {
  /** The value's GGUF type (GgufType). */
  readonly type: number;
  /** For arrays, the element type. */
  readonly elementType?: number;
  readonly value: GgufValue;
  /** The value's bytes exactly as stored (after the type field). */
  readonly raw: Buffer;
}

export interface GgufMetadata {
  readonly version: number;
  readonly numTensors: number;
  readonly entries: ReadonlyMap<string, GgufEntry>;
}

/** A bad or truncated file: the message says where. */
export class GgufFormatError extends Error {
  constructor(path: string, what: string) {
    super(`${path}: not a readable GGUF file (${what})`);
    this.name = 'GgufFormatError';
  }
}

/** Reads bytes on demand from a file descriptor, in growing chunks. */
class Cursor {
  readonly #fd: number;
  readonly #size: number;
  #buf = Buffer.alloc(0);
  #bufStart = 0;
  pos = 0;

  constructor(fd: number, size: number) {
    this.#fd = fd;
    this.#size = size;
  }

  take(n: number): Buffer {
    if (this.pos + n > this.#size) throw new RangeError(`needs ${n} bytes at offset ${this.pos}, file has ${this.#size}`);
    const end = this.pos + n;
    if (this.pos < this.#bufStart || end > this.#bufStart + this.#buf.length) {
      const want = Math.min(Math.max(n, 1 << 20, this.#buf.length * 2), this.#size - this.pos);
      const b = Buffer.alloc(want);
      let got = 0;
      while (got < want) {
        const r = readSync(this.#fd, b, got, want - got, this.pos + got);
        if (r === 0) break;
        got += r;
      }
      this.#buf = b.subarray(0, got);
      this.#bufStart = this.pos;
    }
    const out = this.#buf.subarray(this.pos - this.#bufStart, end - this.#bufStart);
    this.pos = end;
    return out;
  }

  u32(): number {
    return this.take(4).readUInt32LE(0);
  }

  u64(): number {
    const v = this.take(8).readBigUInt64LE(0);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`a length of ${v} bytes`);
    return Number(v);
  }

  str(): string {
    return this.take(this.u64()).toString('utf8');
  }
}

function readScalar(c: Cursor, type: number): GgufValue {
  const n = SCALAR_BYTES[type];
  if (n === undefined) throw new RangeError(`unknown value type ${type}`);
  const b = c.take(n);
  switch (type) {
    case GgufType.UINT8:
      return b.readUInt8(0);
    case GgufType.INT8:
      return b.readInt8(0);
    case GgufType.UINT16:
      return b.readUInt16LE(0);
    case GgufType.INT16:
      return b.readInt16LE(0);
    case GgufType.UINT32:
      return b.readUInt32LE(0);
    case GgufType.INT32:
      return b.readInt32LE(0);
    case GgufType.FLOAT32:
      return b.readFloatLE(0);
    case GgufType.BOOL:
      return b.readUInt8(0) !== 0;
    case GgufType.UINT64:
      return b.readBigUInt64LE(0);
    case GgufType.INT64:
      return b.readBigInt64LE(0);
    default:
      return b.readDoubleLE(0);
  }
}

function readValue(c: Cursor, type: number): { value: GgufValue; elementType?: number } {
  if (type === GgufType.STRING) return { value: c.str() };
  if (type !== GgufType.ARRAY) return { value: readScalar(c, type) };
  const elementType = c.u32();
  const count = c.u64();
  const out: GgufValue[] = [];
  for (let i = 0; i < count; i++) out.push(readValue(c, elementType).value);
  return { value: out, elementType };
}

/** The metadata of the GGUF file at `path`; throws GgufFormatError on a file that is not one. */
export function readGgufMetadata(path: string): GgufMetadata {
  const fd = openSync(path, 'r');
  try {
    const c = new Cursor(fd, fstatSync(fd).size);
    try {
      if (c.take(4).toString('latin1') !== 'GGUF') throw new GgufFormatError(path, 'no GGUF magic');
      const version = c.u32();
      if (version !== 2 && version !== 3) throw new GgufFormatError(path, `version ${version}, expected 2 or 3`);
      const numTensors = c.u64();
      const numKv = c.u64();
      const entries = new Map<string, GgufEntry>();
      for (let i = 0; i < numKv; i++) {
        const key = c.str();
        const type = c.u32();
        const start = c.pos;
        const v = readValue(c, type);
        const end = c.pos;
        c.pos = start;
        const raw = Buffer.from(c.take(end - start));
        entries.set(key, { type, value: v.value, raw, ...(v.elementType !== undefined ? { elementType: v.elementType } : {}) });
      }
      return { version, numTensors, entries };
    } catch (err) {
      if (err instanceof GgufFormatError) throw err;
      throw new GgufFormatError(path, err instanceof Error ? err.message : String(err));
    }
  } finally {
    closeSync(fd);
  }
}
