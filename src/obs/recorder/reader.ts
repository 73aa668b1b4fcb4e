// Reads a flight recording back: every segment of a run folder, oldest first, into plain arrays.
// A segment's last line may be cut short (the process died mid-write): it is skipped and counted;
// any other line that is not a well-formed record (validate.ts: every field of its type) is an
// error naming the file, the line and the field.

import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DecisionLine, DoneLine, EndLine, HeaderLine, RecordLine, RefusedLine, StepLine, SubmitLine } from './format.ts';
import { RECORDING_FORMAT } from './format.ts';
import { recordProblem } from './validate.ts';

export interface Recording {
  /** The header of the oldest segment kept. */
  readonly header: HeaderLine;
  /** Segment file names read, oldest first. */
  readonly segments: readonly string[];
  readonly submits: readonly SubmitLine[];
  readonly steps: readonly StepLine[];
  readonly decisions: readonly DecisionLine[];
  readonly done: readonly DoneLine[];
  readonly refused: readonly RefusedLine[];
  /** Null while the server still runs (or when it did not close cleanly). */
  readonly end: EndLine | null;
  /** Cut-short last lines skipped. */
  readonly numTruncated: number;
}

const SEGMENT = /^segment-(\d{6,})\.jsonl$/;

/** Whether `dir` holds at least one segment file. */
export async function isRecording(dir: string): Promise<boolean> {
  try {
    return (await readdir(dir)).some((f) => SEGMENT.test(f));
  } catch {
    return false;
  }
}

export async function readRecording(dir: string): Promise<Recording> {
  const files = (await readdir(dir)).filter((f) => SEGMENT.test(f)).sort((a, b) => Number(SEGMENT.exec(a)![1]) - Number(SEGMENT.exec(b)![1]));
  if (files.length === 0) throw new Error(`${dir}: no segment files (segment-NNNNNN.jsonl): not a Headroom recording`);
  let header: HeaderLine | null = null;
  const submits: SubmitLine[] = [];
  const steps: StepLine[] = [];
  const decisions: DecisionLine[] = [];
  const done: DoneLine[] = [];
  const refused: RefusedLine[] = [];
  let end: EndLine | null = null;
  let numTruncated = 0;
  for (const [fi, f] of files.entries()) {
    const text = await readFile(join(dir, f), 'utf8');
    const lines = text.split('\n');
    for (const [li, raw] of lines.entries()) {
      if (raw === '') continue;
      let line: RecordLine;
      try {
        line = JSON.parse(raw) as RecordLine;
      } catch {
        // Only the very end of a file can be cut short by a crash.
        if (li === lines.length - 1) {
          numTruncated++;
          continue;
        }
        throw new Error(`${join(dir, f)}:${li + 1}: not a JSON record`);
      }
      const problem = recordProblem(line);
      if (problem !== null) throw new Error(`${join(dir, f)}:${li + 1}: ${problem}`);
      switch (line.t) {
        case 'header':
          if ((line.format as string) !== RECORDING_FORMAT) throw new Error(`${join(dir, f)}: format ${JSON.stringify(line.format)}, expected '${RECORDING_FORMAT}'`);
          if (fi === 0) header = line;
          break;
        case 'submit':
          submits.push(line);
          break;
        case 'step':
          steps.push(line);
          break;
        case 'decision':
          decisions.push(line);
          break;
        case 'done':
          done.push(line);
          break;
        case 'refused':
          refused.push(line);
          break;
        case 'end':
          end = line;
          break;
        default:
          throw new Error(`${join(dir, f)}:${li + 1}: unknown record type ${JSON.stringify((line as unknown as Record<string, unknown>)['t'])}`);
      }
    }
  }
  if (header === null) throw new Error(`${join(dir, files[0]!)}: no header line`);
  return { header, segments: files, submits, steps, decisions, done, refused, end, numTruncated };
}
