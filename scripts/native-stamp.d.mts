// Types for native-stamp.mjs (a plain script: npm install runs it before tsx is usable).
export interface NativeStamp {
  readonly hash: string;
  readonly files: readonly string[];
  readonly [input: string]: unknown;
}
export function nativeStamp(nativeDir: string, inputs: Readonly<Record<string, string>>): NativeStamp;
export function readStampHash(path: string): string | null;
