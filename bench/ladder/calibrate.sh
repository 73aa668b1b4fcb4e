#!/usr/bin/env bash
# Closed-loop capacity calibration for the ladder's rate grid (labelled closed loop in every
# output: it measures what a rung can complete, not latency under an arrival process).
# Rung 1 (no batching) and rung 4 (continuous + paged + prefix cache), one fresh server each.
# Also yields the tokenizer ratio: usage.prompt_tokens / prompt_tokens_est (TOKENS_PER_WORD).
#
#   bash bench/ladder/calibrate.sh            (CAL_S=30 s per point; results/ladder/calibration/)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/ladder/lib.sh
cal_s=${CAL_S:-30}
port=8311
out=results/ladder/calibration
# rung name, concurrency, server flags
points=(
  "1-fifo 2 --scheduler fifo"
  "4-paged-prefix 8 --scheduler continuous --kv paged --prefix-cache on"
)
for p in "${points[@]}"; do
  read -r rung conc flags <<<"$p"
  dir=$out/$rung-c$conc
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  pid=$(start_headroom $port "$dir/server.log" $flags)
  wait_ready "http://127.0.0.1:$port" /ready "$pid"
  node bin/headroom.mjs bench run --url "http://127.0.0.1:$port" --workload chat --loop closed --concurrency "$conc" \
    --duration-s "$cal_s" --warmup-s "$WARMUP_S" --timeout-s "$TIMEOUT_S" --seed "$SEED" --tokens-per-word "$TOKENS_PER_WORD" \
    --slo "$SLO_MS" --out "$dir" --no-progress --json >"$dir/summary.json" || echo "bench run failed: $dir" >&2
  stop_server "$pid"
  echo "calibration $rung c=$conc done (load $(cut -d' ' -f1-3 /proc/loadavg))"
done
node bin/headroom.mjs bench report "$out"/* --slo "$SLO_MS" >"$out/report.txt" || true
