// How long the gateway waits on an upstream and how much it takes from one, by default: far below
// the 300 s a whole (non-streamed) answer may take, since each bound is what one misbehaving
// upstream can cost a client before the request fails over (docs/gateway.md, "A misbehaving
// upstream"). A module of constants only, so the CLI can show them without loading the proxy.

/** A stream's first event comes after the upstream's queue and the prompt's prefill; 30 s is long for either behind a gateway that does flow control. */
export const DEFAULT_FIRST_BYTE_TIMEOUT_MS = 30_000;
/** Between events of a stream a healthy engine is silent for one step (beside a long prefill: seconds). */
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000;
/** One chunk is a few hundred bytes; a tool call's arguments or logprobs a few KB; 1 MiB is far past either. */
export const DEFAULT_MAX_EVENT_BYTES = 1 << 20;
/** vLLM's /metrics with a few models is 100-300 KB; 8 MiB leaves room for many series and stays small. */
export const DEFAULT_MAX_METRICS_BYTES = 8 << 20;
