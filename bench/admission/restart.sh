#!/usr/bin/env bash
# What admission's saved state is worth after a restart. The shipped default (only --slo-ms) with
# --admission-state: one server runs at RATE for FIRST_S seconds (it learns and saves what it
# learned), is stopped, and a second server on the same state directory runs at the same rate for
# AFTER_S seconds — the first minute after a restart; then a fresh server (no state) runs the same
# AFTER_S seconds on the same arrivals (the same seed) as the restarted one.
#
#   [OUT=dir] [FIRST_S=300] [AFTER_S=60] [MODEL=... WORKLOAD=chat-natural] bash bench/admission/restart.sh RATE
#
# Output: $OUT/rate-<r>/{learn,restart,fresh}/... (records.parquet, meta.json, summary.json,
# stats.json, trace.jsonl, server.log) and $OUT/state/ (the state directory), $OUT/README.md the
# table (bench/admission/table.ts). OUT defaults to a new results/runs/admission-restart-<UTC time>.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/ladder/lib.sh
rate=${1:?usage: bash bench/admission/restart.sh RATE}
: "${FIRST_S:=300}"
: "${AFTER_S:=60}"
: "${WORKLOAD:=chat}"
: "${SERVE_FLAGS:=--scheduler continuous --kv paged --prefix-cache on}"
out=${OUT:-results/runs/admission-restart-$(date -u +%Y-%m-%dT%H-%M-%SZ)}
state=$out/state
rm -rf "$state"
mkdir -p "$state"
echo "restart: writing to $out"
port=8341

# run ARM DURATION SEED [FLAGS...]: one fresh server, one open-loop run.
run() {
  local arm=$1 duration=$2 seed=$3 dir=$out/rate-$rate/$1 pid; shift 3
  mkdir -p "$dir"
  rm -f "$dir/trace.jsonl"
  # shellcheck disable=SC2086
  pid=$(start_headroom $port "$dir/server.log" $SERVE_FLAGS --slo-ms "$SLO_MS" --trace-out "$dir/trace.jsonl" "$@")
  if wait_ready "http://127.0.0.1:$port" /ready "$pid"; then
    SEED=$seed WORKLOAD=$WORKLOAD DURATION_S=$duration bench_open "http://127.0.0.1:$port" "$dir" "$rate"
    curl -sf "http://127.0.0.1:$port/stats" >"$dir/stats.json" || true
    curl -sf "http://127.0.0.1:$port/metrics" >"$dir/metrics.txt" || true
  fi
  stop_server "$pid"
  echo "$arm done"
}

run learn "$FIRST_S" "$SEED" --admission-state "$state"
# The first minute counts whole: no warm-up window is set aside after a restart.
WARMUP_S=0 run restart "$AFTER_S" $((SEED + 1)) --admission-state "$state"
WARMUP_S=0 run fresh "$AFTER_S" $((SEED + 1))
node --import tsx bench/admission/table.ts "$out" >"$out/README.md"
