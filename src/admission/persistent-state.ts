// Admission state that survives a restart (`--admission-state DIR`). Every outcome the controller
// learns from is appended to DIR/outcomes.jsonl with what the decision remembered (its base
// predictions, its reason, the budgets); at start-up the last KEEP of them are replayed, in order,
// through the fresh controller's observe(). The online baselines, the calibration windows and the
// under-capacity shortcut's record are deterministic functions of their outcomes in order, so the
// replay rebuilds what the controller had learned — as far back as its longest window reaches —
// and a restart starts calibrated instead of exploring. Decision state (hysteresis, exploration
// quota) is transient and starts fresh.
//
// What replaying cannot rebuild — the engine's own estimates (output lengths, step time by batch)
// that the arithmetic reads — is kept beside them through keep(): DIR/<name>.json, rewritten every
// COMPANION_EVERY outcomes, restored on a warm start and moved aside on a cold one.
//
// DIR/provenance.json names what the outcomes were measured on: runner, model sha256, machine,
// feature names, guarantee, calibration mode and artifact. Outcomes from anywhere else would
// calibrate a bound for another engine, so any difference starts cold with one log line, and the
// old files are moved aside (`*.stale`), never mixed in.
//
// Writing never takes the server down: an error (ENOSPC, EIO, EACCES) stops persisting, logs one
// line and counts in state(); serving goes on. The file is compacted to the last KEEP records
// every KEEP appends (one synchronous write of about KEEP × 0.4 KB).

import { appendFileSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EngineSnapshot } from '../engine/snapshot.ts';
import type { AdmissionContext, AdmissionController, AdmissionDecision, AdmissionOutcome, Companion } from './controller.ts';
import { NUM_FEATURES } from './features.ts';

export const STATE_VERSION = 1;
/** Outcomes replayed: the longest window any model keeps (the online baseline's). */
export const KEEP = 2000;
/** Outcomes between two saves of each kept companion (a few KB each). */
export const COMPANION_EVERY = 50;

/** What the saved outcomes were measured on; any field that differs starts cold. */
export interface StateProvenance {
  readonly runner: string;
  readonly modelSha256: string;
  readonly machine: string;
  readonly featureNames: readonly string[];
  readonly guarantee: number;
  readonly calibration: string;
  /** sha256 of the E2E artifact, or null for the online baseline. */
  readonly artifactSha256: string | null;
}

/** One outcome as saved: features, what the decision remembered, what happened. */
interface SavedOutcome {
  readonly v: number;
  readonly f: number[];
  readonly r: string;
  readonly e: number | null;
  readonly t: number | null;
  readonly s: number;
  readonly b: number | null;
  /** The unmargined arithmetic estimate (DecisionMemo.coldEstimateMs); absent in rows saved before it existed. */
  readonly a?: number | null;
  /** Its prefill part (DecisionMemo.coldPrefillMs); absent in rows saved before it existed. */
  readonly p?: number | null;
  readonly E: number | null;
  readonly T: number | null;
  readonly c: boolean;
}

export interface PersistentStateOptions {
  readonly dir: string;
  readonly provenance: StateProvenance;
  /** One line per event worth a log line (warm start, cold start and why, a write error). */
  readonly log: (line: string) => void;
}

export class PersistentController implements AdmissionController {
  readonly name: string;
  readonly needsFeatures: boolean;
  readonly #inner: AdmissionController;
  readonly #file: string;
  readonly #log: (line: string) => void;
  /** The last KEEP saved lines, oldest first (what a compaction writes). */
  #recent: string[] = [];
  #sinceCompaction = 0;
  #numReplayed = 0;
  #numSaved = 0;
  #start: 'warm' | 'cold' = 'cold';
  readonly #options: PersistentStateOptions;
  #opened = false;
  #coldReason: string | null = null;
  #writeError: string | null = null;
  readonly #dir: string;
  readonly #companions = new Map<string, Companion>();
  #sinceCompanionSave = 0;

  constructor(inner: AdmissionController, o: PersistentStateOptions) {
    this.#inner = inner;
    this.name = inner.name;
    this.needsFeatures = inner.needsFeatures;
    this.#dir = o.dir;
    this.#file = join(o.dir, 'outcomes.jsonl');
    this.#log = o.log;
    this.#options = o;
  }

  /**
   * Reads the directory: a warm start replays what it holds, a cold one moves it aside. Not in the
   * constructor: a server calls it once it holds its port, so a second server that cannot bind
   * never touches the first one's files. Every other method opens first; a second call does nothing.
   */
  open(): void {
    if (this.#opened) return;
    this.#opened = true;
    const o = this.#options;
    const provenanceFile = join(o.dir, 'provenance.json');
    const wanted = JSON.stringify({ version: STATE_VERSION, ...o.provenance }, null, 2);
    const mismatch = existsSync(provenanceFile) ? differences(readFileSync(provenanceFile, 'utf8'), wanted) : 'no saved state';
    if (mismatch === null && existsSync(this.#file)) {
      this.#replay(readFileSync(this.#file, 'utf8'));
      this.#start = 'warm';
      this.#log(`admission state: warm start from ${this.#numReplayed} saved outcomes in ${o.dir}`);
    } else {
      this.#start = 'cold';
      this.#coldReason = mismatch ?? 'no saved outcomes';
      for (const f of [provenanceFile, this.#file]) if (existsSync(f)) renameSync(f, `${f}.stale`);
      writeFileSync(provenanceFile, wanted + '\n');
      writeFileSync(this.#file, '');
      this.#log(mismatch === 'no saved state' ? `admission state: none saved yet; saving in ${o.dir}` : `admission state: cold start (${this.#coldReason}); earlier files moved aside as *.stale in ${o.dir}`);
    }
    // Compact at once: the file then holds exactly what would be replayed.
    if (this.#start === 'warm') this.#compact();
  }

  decide(ctx: AdmissionContext, snapshot: EngineSnapshot | null, features: Float64Array): AdmissionDecision {
    this.open();
    return this.#inner.decide(ctx, snapshot, features);
  }

  fits(ctx: AdmissionContext, snapshot: EngineSnapshot | null, features: Float64Array): boolean {
    this.open();
    return this.#inner.fits?.(ctx, snapshot, features) ?? true;
  }

  observe(features: Float64Array, decision: AdmissionDecision, outcome: AdmissionOutcome): void {
    this.open();
    this.#inner.observe(features, decision, outcome);
    const m = decision.memo;
    if (m === null || this.#writeError !== null) return;
    const saved: SavedOutcome = { v: STATE_VERSION, f: Array.from(features), r: decision.reason, e: m.e2ePredictionMs, t: m.ttftPredictionMs, s: m.sloMs, b: m.ttftBudgetMs, a: m.coldEstimateMs ?? null, p: m.coldPrefillMs ?? null, E: outcome.e2eMs, T: outcome.ttftMs, c: outcome.censored };
    const line = JSON.stringify(saved);
    try {
      appendFileSync(this.#file, line + '\n');
    } catch (err) {
      this.#writeError = (err as NodeJS.ErrnoException).code ?? String(err);
      this.#log(`admission state: cannot write ${this.#file} (${this.#writeError}); no longer saving outcomes (serving goes on)`);
      return;
    }
    this.#numSaved++;
    this.#remember(line);
    if (++this.#sinceCompaction >= KEEP) this.#compact();
    if (++this.#sinceCompanionSave >= COMPANION_EVERY) this.saveCompanions();
  }

  keep(name: string, companion: Companion): void {
    this.open();
    if (!/^[a-z][a-z0-9-]*$/.test(name) || name === 'provenance' || this.#companions.has(name)) throw new Error(`admission state: cannot keep a companion named ${JSON.stringify(name)}`);
    this.#companions.set(name, companion);
    const file = join(this.#dir, `${name}.json`);
    if (!existsSync(file)) return;
    if (this.#start === 'cold') {
      try {
        renameSync(file, `${file}.stale`);
      } catch (err) {
        this.#log(`admission state: cannot move ${file} aside (${(err as NodeJS.ErrnoException).code ?? String(err)}); it will be overwritten`);
      }
      return;
    }
    try {
      const what = companion.restore(JSON.parse(readFileSync(file, 'utf8')));
      this.#log(`admission state: ${name} restored from ${file} (${what})`);
    } catch (err) {
      this.#log(`admission state: cannot restore ${name} from ${file} (${(err as Error).message}); it starts empty`);
    }
  }

  /** Writes every kept companion's state now (also every COMPANION_EVERY outcomes); errors stop persisting, as for outcomes. */
  saveCompanions(): void {
    this.open();
    this.#sinceCompanionSave = 0;
    if (this.#writeError !== null) return;
    for (const [name, companion] of this.#companions) {
      const file = join(this.#dir, `${name}.json`);
      try {
        writeFileSync(`${file}.tmp`, JSON.stringify(companion.save()) + '\n');
        renameSync(`${file}.tmp`, file);
      } catch (err) {
        this.#writeError = (err as NodeJS.ErrnoException).code ?? String(err);
        this.#log(`admission state: cannot write ${file} (${this.#writeError}); no longer saving (serving goes on)`);
        return;
      }
    }
  }

  state(): Record<string, unknown> {
    this.open();
    return { ...this.#inner.state(), persistence: { file: this.#file, start: this.#start, coldReason: this.#coldReason, numReplayed: this.#numReplayed, numSaved: this.#numSaved, writeError: this.#writeError } };
  }

  rehearsal(): AdmissionController {
    this.open();
    return this.#inner.rehearsal?.() ?? this.#inner;
  }

  #replay(text: string): void {
    const lines = text.split('\n').filter((l) => l.trim() !== '');
    for (const line of lines.slice(-KEEP)) {
      let o: SavedOutcome;
      try {
        o = JSON.parse(line) as SavedOutcome;
      } catch {
        continue; // a line cut by a crash mid-write
      }
      if (o.v !== STATE_VERSION || !Array.isArray(o.f) || o.f.length !== NUM_FEATURES) continue;
      const decision: AdmissionDecision = { admit: true, boundMs: null, reason: o.r, memo: { e2ePredictionMs: o.e, ttftPredictionMs: o.t, sloMs: o.s, ttftBudgetMs: o.b, coldEstimateMs: o.a ?? null, coldPrefillMs: o.p ?? null } };
      this.#inner.observe(Float64Array.from(o.f), decision, { e2eMs: o.E, ttftMs: o.T, censored: o.c });
      this.#remember(line);
      this.#numReplayed++;
    }
  }

  #remember(line: string): void {
    this.#recent.push(line);
    if (this.#recent.length > 2 * KEEP) this.#recent = this.#recent.slice(-KEEP);
  }

  #compact(): void {
    this.#sinceCompaction = 0;
    this.saveCompanions();
    this.#recent = this.#recent.slice(-KEEP);
    try {
      writeFileSync(`${this.#file}.tmp`, this.#recent.map((l) => l + '\n').join(''));
      renameSync(`${this.#file}.tmp`, this.#file);
    } catch (err) {
      this.#writeError = (err as NodeJS.ErrnoException).code ?? String(err);
      this.#log(`admission state: cannot compact ${this.#file} (${this.#writeError}); no longer saving outcomes (serving goes on)`);
    }
  }
}

/** The fields of two provenance JSON texts that differ, as one phrase; null when equal. */
function differences(savedText: string, wantedText: string): string | null {
  let saved: Record<string, unknown>;
  try {
    saved = JSON.parse(savedText) as Record<string, unknown>;
  } catch {
    return 'provenance.json is not JSON';
  }
  const wanted = JSON.parse(wantedText) as Record<string, unknown>;
  const diff = Object.keys(wanted).filter((k) => JSON.stringify(saved[k]) !== JSON.stringify(wanted[k]));
  if (diff.length === 0) return null;
  const show = (key: string, v: unknown): string => (key === 'featureNames' && Array.isArray(v) ? `${v.length} features` : JSON.stringify(v) ?? 'none');
  return `saved for another ${diff.map((d) => `${d} (saved ${show(d, saved[d])}, now ${show(d, wanted[d])})`).join(', ')}`;
}
