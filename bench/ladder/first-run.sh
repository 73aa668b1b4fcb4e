#!/usr/bin/env bash
# A first run of ablation rungs 1–4 under the shared-prefix chat workload, open-loop Poisson
# arrivals, on one generated model (MODEL, default models/small-q8_0.gguf). Rate-major,
# configuration order rotated per rate, a fresh server per run (DESIGN.md "Measurement").
# Results: results/ladder/first-run/rate-<r>/<rung>/ (records.parquet, schedule.parquet,
# meta.json, summary.json, server.log, loadavg.txt) and report.txt beside them.
#
#   bash bench/ladder/first-run.sh [rates...]        (DURATION_S=40; other knobs in lib.sh)
#
# Each rung changes one thing from the one before:
#   1-fifo          one request at a time, start to finish (no batching)
#   2-static        static batches of up to 8 (50 ms fill wait); contiguous KV slabs
#   3-continuous    iteration-level batching, chunked prefill; contiguous KV slabs
#   4-paged-prefix  + paged KV blocks and the radix prefix cache
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/ladder/lib.sh
read -r -a rates <<<"${*:-0.5 1 2}"
: "${DURATION_S:=40}"
port=8311
out=${OUT:-results/ladder/first-run}
declare -A flags=(
  [1-fifo]="--scheduler fifo"
  [2-static]="--scheduler static --static-batch 8 --static-wait-ms 50 --kv contiguous"
  [3-continuous]="--scheduler continuous --kv contiguous"
  [4-paged-prefix]="--scheduler continuous --kv paged --prefix-cache on"
)
rungs=(1-fifo 2-static 3-continuous 4-paged-prefix)
i=0
for rate in "${rates[@]}"; do
  for k in 0 1 2 3; do
    rung=${rungs[$(( (k + i) % 4 ))]}
    dir=$out/rate-$rate/$rung
    mkdir -p "$dir"
    echo "before $(cut -d' ' -f1-3 /proc/loadavg)" >"$dir/loadavg.txt"
    # shellcheck disable=SC2086
    pid=$(start_headroom $port "$dir/server.log" ${flags[$rung]})
    if wait_ready "http://127.0.0.1:$port" /ready "$pid"; then
      bench_open "http://127.0.0.1:$port" "$dir" "$rate"
    fi
    stop_server "$pid"
    echo "after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$dir/loadavg.txt"
    echo "rate $rate $rung done ($(tr '\n' ' ' <"$dir/loadavg.txt"))"
  done
  i=$((i + 1))
done
node bin/headroom.mjs bench report "$out"/rate-*/* --slo "$SLO_MS" >"$out/report.txt" || true
