// Server settings, validated once at construction.

export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** Default latency budget of a request (deadline = arrival + SLO); `x-slo-ms` overrides per request. */
  readonly sloMs: number;
  /** Largest `x-slo-ms` accepted. */
  readonly maxSloMs: number;
  /** Largest request body, bytes (413 above). */
  readonly bodyLimitBytes: number;
  /** Largest max_tokens a request may ask for, and the default when it asks for none. */
  readonly maxOutputTokens: number;
  /** Retry-After on refusals, seconds. */
  readonly retryAfterS: number;
  /** How long a drain may take before the process exits anyway, ms. */
  readonly drainTimeoutMs: number;
}

export const DEFAULT_SERVER_CONFIG: ServerConfig = {
  host: '0.0.0.0',
  port: 8000,
  sloMs: 10_000,
  maxSloMs: 3_600_000,
  bodyLimitBytes: 1 << 20,
  maxOutputTokens: 1024,
  retryAfterS: 1,
  drainTimeoutMs: 60_000,
};

export function serverConfig(overrides: Partial<ServerConfig> = {}): ServerConfig {
  const c = { ...DEFAULT_SERVER_CONFIG, ...overrides };
  const positive: (keyof ServerConfig)[] = ['sloMs', 'maxSloMs', 'bodyLimitBytes', 'maxOutputTokens', 'retryAfterS', 'drainTimeoutMs'];
  for (const k of positive) {
    const v = c[k];
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) throw new Error(`config: expected ${k} to be a positive integer, got ${String(v)}`);
  }
  if (!Number.isInteger(c.port) || c.port < 0 || c.port > 65535) throw new Error(`config: expected port in [0, 65535], got ${c.port}`);
  return c;
}
