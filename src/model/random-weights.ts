// Seeded random tensor data: the same (seed, tensor name) always gives the same bytes, whatever
// order tensors are written in. Values are uniform in [-a, a] with a = std·√3 (so the standard
// deviation is `std`); small scales (0.02) keep a random transformer's activations finite.
import { GgmlType } from './gguf-writer.ts';
import type { GgmlType as GgmlTypeT } from './gguf-writer.ts';

/** FNV-1a over the seed and a name: a 32-bit stream id per tensor. */
export function streamSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  h = Math.imul(h, 0x01000193) >>> 0;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h === 0 ? 0x9e3779b9 : h;
}

/** xorshift32: fast, tiny state, plenty for random weights (not for anything statistical). */
class XorShift32 {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0 || 1;
  }
  next(): number {
    let x = this.#s;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#s = x >>> 0;
    return this.#s;
  }
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** IEEE 754 binary32 → binary16 bits, round to nearest even (Node 20 has no Float16Array). */
export function toHalfBits(value: number): number {
  f32Scratch[0] = value;
  const x = u32Scratch[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1) === 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1)) half++;
  e = half >>> 10;
  return sign | half;
}

const CHUNK_ELEMENTS = 1 << 20;

/**
 * A `produce` function for a tensor of `numElements` random values in `type`.
 * Q8_0 values are drawn directly as int8 codes with one scale per block, which is exactly a
 * quantized uniform distribution (and needs no float pass).
 */
export function randomTensor(type: GgmlTypeT, numElements: number, std: number, seed: number): (emit: (c: Uint8Array) => void) => void {
  const a = std * Math.sqrt(3);
  return (emit) => {
    const rng = new XorShift32(seed);
    for (let done = 0; done < numElements; done += CHUNK_ELEMENTS) {
      const n = Math.min(CHUNK_ELEMENTS, numElements - done);
      if (type === GgmlType.F32) {
        const out = new Float32Array(n);
        for (let i = 0; i < n; i++) out[i] = (rng.next() / 0x100000000) * 2 * a - a;
        emit(new Uint8Array(out.buffer));
      } else if (type === GgmlType.F16) {
        const out = new Uint16Array(n);
        for (let i = 0; i < n; i++) out[i] = toHalfBits((rng.next() / 0x100000000) * 2 * a - a);
        emit(new Uint8Array(out.buffer));
      } else {
        const blocks = n / 32;
        const out = new Uint8Array(blocks * 34);
        const scale = toHalfBits(a / 127);
        for (let b = 0; b < blocks; b++) {
          const o = b * 34;
          out[o] = scale & 0xff;
          out[o + 1] = scale >>> 8;
          for (let i = 0; i < 32; i++) out[o + 2 + i] = ((rng.next() % 255) - 127) & 0xff;
        }
        emit(out);
      }
    }
  };
}

/** A `produce` function for an F32 tensor filled with one value (RMS-norm weights). */
export function constantF32(numElements: number, value: number): (emit: (c: Uint8Array) => void) => void {
  return (emit) => emit(new Uint8Array(new Float32Array(numElements).fill(value).buffer));
}
