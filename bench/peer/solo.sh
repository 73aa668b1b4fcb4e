#!/usr/bin/env bash
# One request at a time: Headroom and llama-server on the `long` workload with a closed loop of one
# worker (each request starts when the last one ends), the same seed for both, so the two serve the
# same requests in the same order and every request's TTFT and ITL can be paired. ROUNDS rounds,
# the two systems alternating, a fresh server per run. Headroom runs as bench/peer/long.sh's
# headroom-admit (FLAGS below) with the flight recorder on, so its step records split each request
# into time before its first step, prefill, and decode steps (llama_decode against the whole step).
#
#   LLAMA_SERVER=/path/to/llama-server ARTIFACT=... CAL_TRACES=... bash bench/peer/solo.sh   (ROUNDS=2 DURATION_S=40 SEED=5)
#   node --import tsx bench/peer/solo-table.ts results/per-token/solo
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${MODEL:=models/tiny.gguf}" "${CTX:=16384}" "${PARALLEL:=8}" "${TOKENS_PER_WORD:=1.14}" "${SLO_MS:=4000}" "${MAX_OUTPUT:=512}"
: "${ROUNDS:=2}" "${DURATION_S:=40}" "${HOST_TOKENS:=65536}" "${SEED:=5}"
export SEED
export MODEL CTX PARALLEL TOKENS_PER_WORD SLO_MS MAX_OUTPUT
source bench/ladder/lib.sh
: "${LLAMA_SERVER:?set LLAMA_SERVER to the llama-server binary (see bench/peer/README.md)}"
out=${OUT:-results/per-token/solo}
port=8321
warm_start
solo() {
  node bin/headroom.mjs bench run --url "http://127.0.0.1:$port" --workload long --loop closed --concurrency 1 \
    --duration-s "$DURATION_S" --timeout-s 20 --seed "$SEED" --tokens-per-word "$TOKENS_PER_WORD" --slo "$SLO_MS" \
    --out "$1" --no-progress --json >"$1/summary.json"
}
for round in $(seq 1 "$ROUNDS"); do
  dir=$out/round-$round
  mkdir -p "$dir/headroom" "$dir/llama-server"
  rm -rf "$dir/recording"
  pid=$(start_headroom $port "$dir/headroom/server.log" --ctx-beyond-trained --cache-host-tokens "$HOST_TOKENS" --slo-ms "$SLO_MS" "${warm[@]}" --record "$dir/recording")
  if wait_ready "http://127.0.0.1:$port" /ready "$pid"; then solo "$dir/headroom"; fi
  stop_server "$pid"
  gzip -f "$dir"/recording/*/*.jsonl
  read -r pid proxy < <(start_llama $port "$dir/llama-server/server.log")
  if wait_ready "http://127.0.0.1:$port" /health "$pid"; then solo "$dir/llama-server"; fi
  stop_server "$pid"
  stop_server "$proxy"
  echo "round $round done"
done
