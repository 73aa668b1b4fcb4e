#!/usr/bin/env bash
# The admission overload sweep: the same engine with admission off and with the conformal
# controller at two guarantees, over a grid of offered rates from below saturation to well past it.
# Rate-major, arm order rotated per rate, a fresh server per run (trace rows kept per run: online
# coverage and the admitted rate over time come from them).
#
#   [SERVE_FLAGS="--runner mock --mock-speed 2 ..."] ARTIFACT=results/admission/e2e-gbdt.json CAL_TRACES=results/admission/collect/round-2 \
#     bash bench/admission/sweep.sh [rates...]                (DURATION_S=60; model and pool in bench/ladder/lib.sh)
#
# Without ARTIFACT the conformal arms use the online baseline from a cold start.
# Output: $OUT/rate-<r>/<arm>/{records.parquet, meta.json, summary.json, trace.jsonl, server.log}
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/ladder/lib.sh
read -r -a rates <<<"${*:-0.5 1 2 4}"
: "${DURATION_S:=60}"
: "${WORKLOAD:=chat}"
out=${OUT:-results/admission/sweep}
port=8331
: "${SERVE_FLAGS:=--scheduler continuous --kv paged --prefix-cache on}"
common="$SERVE_FLAGS --slo-ms $SLO_MS"
extra=""
if [[ -n "${ARTIFACT:-}" ]]; then
  extra="--admission-artifact $ARTIFACT"
  [[ -n "${CAL_TRACES:-}" ]] && extra="$extra --admission-calibration-traces $CAL_TRACES"
fi
declare -A flags=(
  [off]="--admission off"
  [conformal-95]="--admission conformal --admission-guarantee 0.95 $extra"
  [conformal-80]="--admission conformal --admission-guarantee 0.8 $extra"
)
arms=(off conformal-95 conformal-80)
i=0
for rate in "${rates[@]}"; do
  for k in 0 1 2; do
    arm=${arms[$(( (k + i) % 3 ))]}
    dir=$out/rate-$rate/$arm
    mkdir -p "$dir"
    rm -f "$dir/trace.jsonl"
    # shellcheck disable=SC2086
    pid=$(start_headroom $port "$dir/server.log" $common ${flags[$arm]} --trace-out "$dir/trace.jsonl")
    if wait_ready "http://127.0.0.1:$port" /ready "$pid"; then
      WORKLOAD=$WORKLOAD bench_open "http://127.0.0.1:$port" "$dir" "$rate"
      curl -sf "http://127.0.0.1:$port/stats" >"$dir/stats.json" || true
    fi
    stop_server "$pid"
    echo "rate $rate $arm done"
  done
  i=$((i + 1))
done
node --import tsx bench/admission/table.ts "$out" >"$out/README.md"
