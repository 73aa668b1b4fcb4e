// A streaming GGUF v3 writer (little-endian): metadata and tensor infos are declared first, then
// tensor data is produced one tensor at a time in chunks, so a 500 MB model never sits in memory.
//
// Layout written:
//   "GGUF" u32(3) u64(nTensors) u64(nKv) | kv* | tensorInfo* | pad to alignment | data (each tensor aligned)
// A tensor info's dims list the row length first (ne0), as ggml does.
import { closeSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { bug } from '../util/bug.ts';

/** ggml tensor types this writer produces. */
export const GgmlType = { F32: 0, F16: 1, Q8_0: 8 } as const;
export type GgmlType = (typeof GgmlType)[keyof typeof GgmlType];

/** GGUF metadata value types. */
const KvType = { UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9 } as const;

export type KvValue =
  | { readonly type: 'u32' | 'i32' | 'f32'; readonly value: number }
  | { readonly type: 'bool'; readonly value: boolean }
  | { readonly type: 'string'; readonly value: string }
  | { readonly type: 'string[]'; readonly value: readonly string[] }
  | { readonly type: 'f32[]' | 'i32[]'; readonly value: ArrayLike<number> }
  /** A value copied from another GGUF as stored (gguf-reader.ts): its type number and its bytes after the type field. */
  | { readonly type: 'raw'; readonly ggufType: number; readonly bytes: Uint8Array };

export interface TensorSpec {
  readonly name: string;
  /** Row length first. */
  readonly dims: readonly number[];
  readonly type: GgmlType;
  /** Writes the tensor's bytes, in order, by calling `emit` with successive chunks. */
  readonly produce: (emit: (chunk: Uint8Array) => void) => void;
}

export const GGUF_ALIGNMENT = 32;

/** Bytes a tensor of `numElements` takes in `type` (Q8_0: 34 bytes per block of 32). */
export function tensorBytes(type: GgmlType, numElements: number): number {
  switch (type) {
    case GgmlType.F32:
      return numElements * 4;
    case GgmlType.F16:
      return numElements * 2;
    case GgmlType.Q8_0:
      if (numElements % 32 !== 0) throw new Error(`Q8_0 needs a multiple of 32 elements, got ${numElements}`);
      return (numElements / 32) * 34;
  }
}

class ByteSink {
  #parts: Buffer[] = [];
  #length = 0;
  get length(): number {
    return this.#length;
  }
  #push(b: Buffer): void {
    this.#parts.push(b);
    this.#length += b.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.#push(b);
  }
  i32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.#push(b);
  }
  u64(v: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.#push(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.#push(b);
  }
  str(s: string): void {
    const bytes = Buffer.from(s, 'utf8');
    this.u64(bytes.length);
    this.#push(bytes);
  }
  raw(b: Buffer): void {
    this.#push(b);
  }
  pad(alignment: number): void {
    const rem = this.#length % alignment;
    if (rem !== 0) this.#push(Buffer.alloc(alignment - rem));
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.#parts);
  }
}

function writeKv(sink: ByteSink, key: string, kv: KvValue): void {
  sink.str(key);
  switch (kv.type) {
    case 'u32':
      sink.u32(KvType.UINT32);
      sink.u32(kv.value);
      return;
    case 'i32':
      sink.u32(KvType.INT32);
      sink.i32(kv.value);
      return;
    case 'f32':
      sink.u32(KvType.FLOAT32);
      sink.f32(kv.value);
      return;
    case 'bool':
      sink.u32(KvType.BOOL);
      sink.raw(Buffer.from([kv.value ? 1 : 0]));
      return;
    case 'string':
      sink.u32(KvType.STRING);
      sink.str(kv.value);
      return;
    case 'string[]':
      sink.u32(KvType.ARRAY);
      sink.u32(KvType.STRING);
      sink.u64(kv.value.length);
      for (const s of kv.value) sink.str(s);
      return;
    case 'raw':
      sink.u32(kv.ggufType);
      sink.raw(Buffer.from(kv.bytes));
      return;
    case 'f32[]':
    case 'i32[]': {
      sink.u32(KvType.ARRAY);
      sink.u32(kv.type === 'f32[]' ? KvType.FLOAT32 : KvType.INT32);
      sink.u64(kv.value.length);
      const b = Buffer.alloc(kv.value.length * 4);
      for (let i = 0; i < kv.value.length; i++) {
        if (kv.type === 'f32[]') b.writeFloatLE(kv.value[i]!, i * 4);
        else b.writeInt32LE(kv.value[i]!, i * 4);
      }
      sink.raw(b);
      return;
    }
  }
}

/**
 * Writes a GGUF file at `path` (via a temporary file renamed into place, so a crash never leaves
 * a truncated model under the final name). Returns the file size in bytes.
 */
export function writeGguf(path: string, metadata: ReadonlyMap<string, KvValue>, tensors: readonly TensorSpec[]): number {
  const head = new ByteSink();
  head.raw(Buffer.from('GGUF', 'ascii'));
  head.u32(3);
  head.u64(tensors.length);
  head.u64(metadata.size);
  for (const [key, kv] of metadata) writeKv(head, key, kv);

  const sizes: number[] = [];
  let offset = 0;
  for (const t of tensors) {
    const numElements = t.dims.reduce((a, b) => a * b, 1);
    const size = tensorBytes(t.type, numElements);
    head.str(t.name);
    head.u32(t.dims.length);
    for (const d of t.dims) head.u64(d);
    head.u32(t.type);
    head.u64(offset);
    sizes.push(size);
    offset += size;
    offset += (GGUF_ALIGNMENT - (offset % GGUF_ALIGNMENT)) % GGUF_ALIGNMENT;
  }
  head.pad(GGUF_ALIGNMENT);

  // A folder that does not exist yet is made (`model make --out models/tiny.gguf` on a fresh clone).
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w');
  let written = 0;
  try {
    const put = (b: Uint8Array): void => {
      let off = 0;
      while (off < b.length) off += writeSync(fd, b, off, b.length - off);
      written += b.length;
    };
    put(head.toBuffer());
    tensors.forEach((t, i) => {
      const start = written;
      t.produce(put);
      const got = written - start;
      if (got !== sizes[i]) bug(`tensor ${t.name} produced ${got} bytes, expected ${sizes[i]}`);
      const rem = written % GGUF_ALIGNMENT;
      if (rem !== 0) put(new Uint8Array(GGUF_ALIGNMENT - rem));
    });
    closeSync(fd);
    renameSync(tmp, path);
  } catch (err) {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
    rmSync(tmp, { force: true });
    throw err;
  }
  return written;
}
