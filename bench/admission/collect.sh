#!/usr/bin/env bash
# Collect admission training data: admission off, the server writing one trace row per request
# (--trace-out), over a grid of offered rates from below the knee to well past it. ROUNDS passes
# over the grid, the rate order rotated each pass, a fresh server per (round, rate) block, seeds
# recorded. Whole rounds become whole folds downstream (src/admission/dataset.ts).
#
#   [OUT=dir] bash bench/admission/collect.sh [rates...]      (ROUNDS=4 DURATION_S=60; model and pool in bench/ladder/lib.sh)
#
# Output: $OUT/round-<r>/rate-<x>/{trace.jsonl, records.parquet, meta.json, summary.json, server.log};
# OUT defaults to a new results/runs/admission-collect-<UTC time> (results/runs/ is ignored by git;
# pass OUT=results/... to update a committed collection, results/README.md lists them).
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/ladder/lib.sh
read -r -a rates <<<"${*:-0.2 0.4 0.8 1.6 3.2}"
: "${ROUNDS:=4}"
: "${DURATION_S:=60}"
: "${WORKLOAD:=chat}"
: "${SERVE_FLAGS:=--scheduler continuous --kv paged --prefix-cache on}"
out=${OUT:-results/runs/admission-collect-$(date -u +%Y-%m-%dT%H-%M-%SZ)}
mkdir -p "$out"
echo "collect: writing to $out"
port=8321
n=${#rates[@]}
for round in $(seq 0 $((ROUNDS - 1))); do
  for k in $(seq 0 $((n - 1))); do
    rate=${rates[$(( (k + round) % n ))]}
    dir=$out/round-$round/rate-$rate
    mkdir -p "$dir"
    rm -f "$dir/trace.jsonl"
    # shellcheck disable=SC2086
    # --admission off last, whatever SERVE_FLAGS says: the traces must be those of an unmanaged engine.
    pid=$(start_headroom $port "$dir/server.log" $SERVE_FLAGS --slo-ms "$SLO_MS" --trace-out "$dir/trace.jsonl" --admission off)
    if wait_ready "http://127.0.0.1:$port" /ready "$pid"; then
      SEED=$((SEED + 1000 * round)) WORKLOAD=$WORKLOAD bench_open "http://127.0.0.1:$port" "$dir" "$rate"
    fi
    stop_server "$pid"
    echo "round $round rate $rate: $(wc -l <"$dir/trace.jsonl" 2>/dev/null || echo 0) trace rows"
  done
done
