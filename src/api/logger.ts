// The process's one logger: fastify's own (pino), configured here. Request lines (request-log.ts),
// server lifecycle lines (app.ts) and errors all go through it.
//
//   json  one JSON object per line: {"level":"info","time":"<ISO 8601>","pid":…,"msg":…, fields}
//   text  the same facts for a terminal: `<time> INFO  <msg> key=value …`
//
// Invariants:
// - A line logged just before process.exit is not lost: pino's default destination flushes on
//   exit, and the text format writes through process.stdout (synchronous for files and pipes).
// - The text format is a rendering of the JSON line, never a second set of facts.

import type { FastifyServerOptions } from 'fastify';
import type { LogFormat, LogLevel } from './config.ts';

/** Where lines go (default: stdout). Tests pass one that keeps them. */
export interface LogDestination {
  write(line: string): void;
}

export function loggerOptions(level: LogLevel, format: LogFormat, destination?: LogDestination): NonNullable<FastifyServerOptions['logger']> {
  const stream = format === 'text' ? textStream(destination ?? process.stdout) : destination;
  return {
    level,
    base: { pid: process.pid },
    timestamp: () => `,"time":"${new Date().toISOString()}"`,
    formatters: { level: (label: string) => ({ level: label }) },
    ...(stream === undefined ? {} : { stream }),
  };
}

const FIXED = new Set(['level', 'time', 'pid', 'msg']);

/** JSON lines in, text lines out. */
export function textStream(out: LogDestination): LogDestination {
  return {
    write(line: string): void {
      let o: Record<string, unknown>;
      try {
        o = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      const fields = Object.entries(o).filter(([k]) => !FIXED.has(k)).map(([k, v]) => `${k}=${textValue(v)}`);
      const level = plain(o.level).toUpperCase().padEnd(5);
      out.write(`${plain(o.time)} ${level} ${plain(o.msg)}${fields.length > 0 ? ' ' + fields.join(' ') : ''}\n`);
    },
  };
}

function plain(v: unknown): string {
  return typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v);
}

function textValue(v: unknown): string {
  if (typeof v === 'string') return /^[\w.:/@+=-]+$/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v) ?? 'null';
}
