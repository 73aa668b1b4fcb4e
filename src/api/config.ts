// Server settings, validated once at construction. Everything here is shown on /stats, so no
// secret belongs here (API keys live in auth.ts's KeyRing, handed to the server apart).

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['json', 'text'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** A second port serving only /health, /ready and /metrics (api/probe-listener.ts); null = none. */
  readonly probePort: number | null;
  /** Default latency budget of a request (deadline = arrival + SLO); `x-slo-ms` overrides per request. */
  readonly sloMs: number;
  /** Smallest `x-slo-ms` accepted: below it a budget cannot be met, and is refused at once (400). */
  readonly minSloMs: number;
  /** Largest `x-slo-ms` accepted (400 above). */
  readonly maxSloMs: number;
  /** Largest request body, bytes (413 above). */
  readonly bodyLimitBytes: number;
  /** Largest max_tokens a request may ask for, and the default when it asks for none. */
  readonly maxOutputTokens: number;
  /** Retry-After on refusals, seconds. */
  readonly retryAfterS: number;
  /** Drain deadline, ms: past it, streams still running get an SSE error event and [DONE], and the process exits. */
  readonly drainTimeoutMs: number;
  /** Longest time to receive a request's headers, ms (then 408 and close). */
  readonly headersTimeoutMs: number;
  /** Longest time to receive a whole request, headers and body, ms (then 408 and close). */
  readonly requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open after a response, ms. */
  readonly keepAliveTimeoutMs: number;
  /** Most open client connections; past it only /health and /ready are answered (api/connections.ts). */
  readonly maxConnections: number;
  /** Most open connections from one client address. */
  readonly maxConnectionsPerAddress: number;
  /** Least severe log line written (request lines are `info`; errors `warn`/`error`). */
  readonly logLevel: LogLevel;
  /** One JSON object per line (pino's shape), or a readable text line. */
  readonly logFormat: LogFormat;
  /** Put prompt and output text in request log lines (off: never). */
  readonly logPrompts: boolean;
  /** Origins allowed to call the API from a browser (`*` = any); empty = CORS off. */
  readonly corsOrigins: readonly string[];
  /** Names the model answers to (first = the canonical one, in metrics); empty = the model file's stem. */
  readonly servedModelNames: readonly string[];
  /** With API keys, /metrics needs one too (default: open, like /health and /ready). */
  readonly protectMetrics: boolean;
}

export const DEFAULT_SERVER_CONFIG: ServerConfig = {
  host: '0.0.0.0',
  port: 8000,
  probePort: null,
  sloMs: 10_000,
  minSloMs: 100,
  maxSloMs: 3_600_000,
  bodyLimitBytes: 1 << 20,
  maxOutputTokens: 1024,
  retryAfterS: 1,
  drainTimeoutMs: 60_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 1024,
  maxConnectionsPerAddress: 256,
  logLevel: 'info',
  logFormat: 'json',
  logPrompts: false,
  corsOrigins: [],
  servedModelNames: [],
  protectMetrics: false,
};

/** Longest served model name; a name is any printable text without spaces. */
const MAX_MODEL_NAME_CHARS = 256;

export function serverConfig(overrides: Partial<ServerConfig> = {}): ServerConfig {
  const c = { ...DEFAULT_SERVER_CONFIG, ...overrides };
  const positive: (keyof ServerConfig)[] = [
    'sloMs', 'minSloMs', 'maxSloMs', 'bodyLimitBytes', 'maxOutputTokens', 'retryAfterS', 'drainTimeoutMs',
    'headersTimeoutMs', 'requestTimeoutMs', 'keepAliveTimeoutMs', 'maxConnections', 'maxConnectionsPerAddress',
  ];
  for (const k of positive) {
    const v = c[k];
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) throw new Error(`config: expected ${k} to be a positive integer, got ${String(v)}`);
  }
  if (!Number.isInteger(c.port) || c.port < 0 || c.port > 65535) throw new Error(`config: expected port in [0, 65535], got ${c.port}`);
  if (c.probePort !== null) {
    if (!Number.isInteger(c.probePort) || c.probePort < 0 || c.probePort > 65535) throw new Error(`config: expected probePort in [0, 65535], got ${c.probePort}`);
    if (c.probePort !== 0 && c.probePort === c.port) throw new Error(`config: expected probePort to differ from port, got ${c.port} for both`);
  }
  if (!(c.minSloMs <= c.sloMs && c.sloMs <= c.maxSloMs)) {
    throw new Error(`config: expected minSloMs ≤ sloMs ≤ maxSloMs, got ${c.minSloMs} ≤ ${c.sloMs} ≤ ${c.maxSloMs}`);
  }
  if (c.headersTimeoutMs > c.requestTimeoutMs) {
    throw new Error(`config: expected headersTimeoutMs ≤ requestTimeoutMs, got ${c.headersTimeoutMs} > ${c.requestTimeoutMs}`);
  }
  if (c.maxConnectionsPerAddress > c.maxConnections) {
    throw new Error(`config: expected maxConnectionsPerAddress ≤ maxConnections, got ${c.maxConnectionsPerAddress} > ${c.maxConnections}`);
  }
  if (!LOG_LEVELS.includes(c.logLevel)) throw new Error(`config: expected logLevel in ${LOG_LEVELS.join('|')}, got ${String(c.logLevel)}`);
  if (!LOG_FORMATS.includes(c.logFormat)) throw new Error(`config: expected logFormat in ${LOG_FORMATS.join('|')}, got ${String(c.logFormat)}`);
  for (const o of c.corsOrigins) {
    if (o !== '*' && !/^https?:\/\/[^/\s]+$/.test(o)) throw new Error(`config: expected corsOrigins to be CORS origins like https://app.example.com (scheme and host, no path) or *, got '${o}'`);
  }
  for (const name of c.servedModelNames) {
    if (!/^[\x21-\x7e]+$/.test(name) || name.length > MAX_MODEL_NAME_CHARS) throw new Error(`config: expected servedModelNames to be names of 1-${MAX_MODEL_NAME_CHARS} printable characters without spaces, got '${name}'`);
  }
  if (new Set(c.servedModelNames).size !== c.servedModelNames.length) throw new Error(`config: expected distinct served model names, got ${c.servedModelNames.join(', ')}`);
  return c;
}
