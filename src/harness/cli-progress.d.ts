// Minimal types for cli-progress 3.12 (the package ships none); only what the harness uses.
declare module 'cli-progress' {
  export interface Options {
    format?: string;
    stream?: NodeJS.WritableStream;
    hideCursor?: boolean;
    clearOnComplete?: boolean;
    noTTYOutput?: boolean;
  }
  export class SingleBar {
    constructor(opts: Options, preset?: unknown);
    start(total: number, value: number, payload?: Record<string, unknown>): void;
    update(value: number, payload?: Record<string, unknown>): void;
    setTotal(total: number): void;
    stop(): void;
  }
  export const Presets: { shades_classic: unknown };
  const _default: { SingleBar: typeof SingleBar; Presets: typeof Presets };
  export default _default;
}
