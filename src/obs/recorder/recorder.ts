// The flight recorder: with `serve --record DIR`, a live server's step records, admission
// decisions, finishes and refusals go to DIR/<run>/segment-NNNNNN.jsonl (format.ts).
//
// Hot path: a listener call builds one small object and pushes it on an array — no I/O, no
// serialisation. A timer (every `flushMs`) and close() turn the pending records into lines and
// append them with async writes, one flush at a time.
//
// Bounds (invariants the tests check):
// - no segment file is larger than `maxSegmentBytes` (a single record that could never fit is
//   dropped and counted, not written);
// - at most `maxSegments` segment files exist: opening one more deletes the oldest;
// - at most `maxPendingRecords` wait in memory: past that, new ones are dropped and counted (a disk
//   that cannot keep up costs records, never the server's memory).
// Every segment opens with the run header, so whatever the rotation kept is readable alone.
//
// A write error (disk full, I/O error, permission) stops the recording for good: the file is
// closed, pending and later records are dropped and counted, `onWriteError` is told once, and
// nothing is thrown — the server's requests never depend on its recording.

import type { FileHandle } from 'node:fs/promises';
import { mkdir, open, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { RefusalReason } from '../../backend/refusal.ts';
import type { Clock } from '../../engine/clock.ts';
import type { FinishReason, RequestTimeline } from '../../engine/outputs.ts';
import type { StepRecord } from '../../engine/step-record.ts';
import type { DecisionEvent, RunListener } from '../run-listener.ts';
import type { HeaderLine, RecordLine } from './format.ts';
import type { Request } from '../../engine/request.ts';
import { decisionLine, doneLine, RECORDING_FORMAT, RECORDING_VERSION, refusedLine, stepLine, submitLine } from './format.ts';

export interface RecorderLimits {
  /** Largest segment file, bytes (default 16 MiB). */
  readonly maxSegmentBytes?: number;
  /** Most segment files kept per run (default 8). */
  readonly maxSegments?: number;
  /** Write pending records this often, ms (default 1000). */
  readonly flushMs?: number;
  /** Most records held between flushes (default 100,000). */
  readonly maxPendingRecords?: number;
}

export interface RecorderOptions extends RecorderLimits {
  /** The --record directory; the run gets a folder of its own inside it. */
  readonly dir: string;
  /** Folder name of this run (default: run-<UTC time>-<pid>). */
  readonly runName?: string;
  readonly clock: Clock;
  readonly version: string;
  readonly meta: Readonly<Record<string, unknown>>;
  /** KV block size of the prompt hashes in submit records (default 16; the scheduler's). */
  readonly blockSize?: number;
  /** Called once, at the first write error after start (the recording has stopped). */
  readonly onWriteError?: (err: Error) => void;
}

export const DEFAULT_RECORDER_LIMITS = { maxSegmentBytes: 16 * 1024 * 1024, maxSegments: 8, flushMs: 1000, maxPendingRecords: 100_000 } as const;
/** The smallest segment cap accepted: a header and some records must fit. */
export const MIN_SEGMENT_BYTES = 4096;

export const segmentName = (n: number): string => `segment-${String(n).padStart(6, '0')}.jsonl`;
const RUN_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const isRunName = (s: string): boolean => RUN_NAME.test(s);

export class Recorder implements RunListener {
  readonly runName: string;
  /** The run's folder. */
  readonly runDir: string;
  readonly #opts: Required<RecorderLimits>;
  readonly #clock: Clock;
  readonly #blockSize: number;
  readonly #header: Omit<HeaderLine, 'segment'>;
  #pending: RecordLine[] = [];
  #file: FileHandle | null = null;
  #segment = 0;
  #segmentBytes = 0;
  /** Segment numbers on disk, oldest first. */
  #segments: number[] = [];
  #numDropped = 0;
  #numWritten = 0;
  #flushing: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | null = null;
  #closed = false;
  #closing: Promise<void> | null = null;
  /** The write error that stopped the recording; null while it records. */
  #writeError: Error | null = null;
  readonly #onWriteError: ((err: Error) => void) | undefined;

  private constructor(opts: RecorderOptions, runName: string, runDir: string) {
    this.#opts = { ...DEFAULT_RECORDER_LIMITS, ...definedOnly(opts) };
    checkLimits(this.#opts);
    this.#clock = opts.clock;
    this.#blockSize = opts.blockSize ?? 16;
    this.#onWriteError = opts.onWriteError;
    this.runName = runName;
    this.runDir = runDir;
    this.#header = { t: 'header', format: RECORDING_FORMAT, v: RECORDING_VERSION, run: runName, startedAt: new Date().toISOString(), clockAtStartMs: opts.clock.nowMs(), version: opts.version, meta: opts.meta };
  }

  /** Creates the run's folder and its first segment (header written), and starts the flush timer. */
  static async start(opts: RecorderOptions): Promise<Recorder> {
    checkLimits({ ...DEFAULT_RECORDER_LIMITS, ...definedOnly(opts) });
    const base = opts.runName ?? defaultRunName();
    if (!isRunName(base)) throw new Error(`Recorder: expected a run name of letters, digits, '.', '_' and '-', got '${base}'`);
    // A second server started in the same second with the same pid (tests) gets -2, -3, ...
    for (let k = 1; ; k++) {
      const name = k === 1 ? base : `${base}-${k}`;
      const dir = join(opts.dir, name);
      try {
        await mkdir(dir);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EEXIST' && k < 100) continue;
        throw e;
      }
      const r = new Recorder(opts, name, dir);
      await r.#openSegment();
      r.#timer = setInterval(() => void r.flush(), r.#opts.flushMs);
      r.#timer.unref();
      return r;
    }
  }

  /** Records written to disk so far, and dropped. */
  get numWritten(): number {
    return this.#numWritten;
  }

  get numDropped(): number {
    return this.#numDropped;
  }

  /** The write error that stopped the recording (its message names the errno), or null. */
  get writeError(): string | null {
    return this.#writeError?.message ?? null;
  }

  /** Whether records are still being written (false once closed or stopped by a write error). */
  get recording(): boolean {
    return !this.#closed && this.#writeError === null;
  }

  readonly step = (r: StepRecord): void => this.#push(stepLine(r));
  readonly submitted = (req: Request): void => {
    if (!this.#closed) this.#push(submitLine(req, this.#clock.nowMs(), this.#blockSize));
  };
  readonly decided = (d: DecisionEvent): void => this.#push(decisionLine(d));
  readonly finished = (t: RequestTimeline, reason: FinishReason): void => this.#push(doneLine(t, reason));
  readonly refused = (t: RequestTimeline, reason: RefusalReason, atMs: number): void => this.#push(refusedLine(t, reason, atMs));

  /** Write what is pending (resolves when it is on disk). Flushes run one at a time, in order. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(() => this.#write()).catch((err: unknown) => this.#fail(err));
    return this.#flushing;
  }

  /** Flush, write the end record (with every drop counted), close the file. Later events are ignored. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    await this.flush();
    this.#pending.push({ t: 'end', at: Math.round(this.#clock.nowMs() * 1000) / 1000, dropped: this.#numDropped });
    await this.flush();
    const file = this.#file;
    this.#file = null;
    await file?.close().catch((err: unknown) => this.#fail(err));
  }

  /** The first write error stops the recording; later ones (the same full disk) say nothing new. */
  async #fail(err: unknown): Promise<void> {
    if (this.#writeError !== null) return;
    this.#writeError = err instanceof Error ? err : new Error(String(err));
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#numDropped += this.#pending.length;
    this.#pending = [];
    const file = this.#file;
    this.#file = null;
    await file?.close().catch(() => undefined);
    this.#onWriteError?.(this.#writeError);
  }

  #push(line: RecordLine): void {
    if (this.#closed) return;
    if (this.#writeError !== null || this.#pending.length >= this.#opts.maxPendingRecords) {
      this.#numDropped++;
      return;
    }
    this.#pending.push(line);
  }

  async #write(): Promise<void> {
    if (this.#pending.length === 0 || this.#file === null) return;
    const lines = this.#pending;
    this.#pending = [];
    const written0 = this.#numWritten;
    try {
      const max = this.#opts.maxSegmentBytes;
      let chunk = '';
      let chunkBytes = 0;
      let chunkLines = 0;
      for (const line of lines) {
        const text = `${JSON.stringify(line)}\n`;
        const bytes = Buffer.byteLength(text);
        if (this.#headerBytes() + bytes > max) continue; // could never fit: dropped
        if (this.#segmentBytes + chunkBytes + bytes > max) {
          await this.#append(chunk, chunkBytes, chunkLines);
          chunk = '';
          chunkBytes = 0;
          chunkLines = 0;
          await this.#rotate();
        }
        chunk += text;
        chunkBytes += bytes;
        chunkLines++;
      }
      await this.#append(chunk, chunkBytes, chunkLines);
    } finally {
      // On a write error, what this flush did not write is dropped too.
      this.#numDropped += lines.length - (this.#numWritten - written0);
    }
  }

  async #append(text: string, bytes: number, numLines: number): Promise<void> {
    if (bytes === 0 || this.#file === null) return;
    await this.#file.write(text);
    this.#segmentBytes += bytes;
    this.#numWritten += numLines;
  }

  async #rotate(): Promise<void> {
    await this.#file?.close();
    this.#file = null;
    await this.#openSegment();
  }

  async #openSegment(): Promise<void> {
    this.#segment++;
    const file = await open(join(this.runDir, segmentName(this.#segment)), 'wx');
    this.#file = file;
    this.#segments.push(this.#segment);
    while (this.#segments.length > this.#opts.maxSegments) {
      const oldest = this.#segments.shift()!;
      await unlink(join(this.runDir, segmentName(oldest))).catch(() => undefined);
    }
    const header = `${JSON.stringify({ ...this.#header, segment: this.#segment })}\n`;
    await file.write(header);
    this.#segmentBytes = Buffer.byteLength(header);
  }

  /** A header line's size (segment numbers grow, so this is an upper bound for the next ones). */
  #headerBytes(): number {
    return Buffer.byteLength(JSON.stringify({ ...this.#header, segment: 999_999_999 })) + 1;
  }
}

function defaultRunName(): string {
  const iso = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  return `run-${iso}-${process.pid}`;
}

function definedOnly(o: RecorderLimits): RecorderLimits {
  return Object.fromEntries(Object.entries({ maxSegmentBytes: o.maxSegmentBytes, maxSegments: o.maxSegments, flushMs: o.flushMs, maxPendingRecords: o.maxPendingRecords }).filter(([, v]) => v !== undefined));
}

function checkLimits(o: Required<RecorderLimits>): void {
  if (!(Number.isInteger(o.maxSegmentBytes) && o.maxSegmentBytes >= MIN_SEGMENT_BYTES)) throw new Error(`Recorder: expected maxSegmentBytes to be an integer ≥ ${MIN_SEGMENT_BYTES}, got ${o.maxSegmentBytes}`);
  if (!(Number.isInteger(o.maxSegments) && o.maxSegments >= 1)) throw new Error(`Recorder: expected maxSegments to be an integer ≥ 1, got ${o.maxSegments}`);
  if (!(o.flushMs > 0)) throw new Error(`Recorder: expected flushMs > 0, got ${o.flushMs}`);
  if (!(Number.isInteger(o.maxPendingRecords) && o.maxPendingRecords >= 1)) throw new Error(`Recorder: expected maxPendingRecords to be an integer ≥ 1, got ${o.maxPendingRecords}`);
}
