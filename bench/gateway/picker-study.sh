#!/usr/bin/env bash
# The picker's weights, measured (docs/gateway.md, "Picker defaults"): two Headroom engine replicas
# behind the gateway, a workload whose prompts share long system prompts, one open-loop rate, and
# one arm per picker setting; SEEDS × arms, the arm order rotated per seed, fresh replicas and a
# fresh gateway per run (no run inherits another's caches).
#
#   [RATE=0.8] [SEEDS="1 2 3"] [ARMS="..."] OUT=results/gateway/picker bash bench/gateway/picker-study.sh
#   node --import tsx bench/gateway/picker-table.ts results/gateway/picker
#
# Arms (gateway flags; everything else at the defaults):
#   default       --prefix-weight 2 --queue-weight 1 --kv-weight 1   (what `headroom gateway` ships)
#   load-only     --prefix-weight 0                                   (no affinity: least loaded wins)
#   prefix-8      --prefix-weight 8                                   (affinity dominates)
#   no-guard      --saturation-queue 1000 --saturation-kv 1           (affinity never yields to load)
# Each run keeps the harness's records and summary, the gateway's /stats (requests per upstream)
# and each replica's prefix-cache counters (/metrics) read after the load.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${MODEL:=models/tiny.gguf}" "${THREADS:=1}" "${CTX:=16384}" "${PARALLEL:=8}" "${TOKENS_PER_WORD:=1.14}" "${SLO_MS:=4000}"
: "${DURATION_S:=40}" "${WORKLOAD:=long}" "${MAX_OUTPUT:=512}" "${RATE:=0.8}" "${SEEDS:=1 2 3}"
: "${ARMS:=default load-only prefix-8 no-guard}"
export MODEL THREADS CTX PARALLEL TOKENS_PER_WORD SLO_MS DURATION_S WORKLOAD MAX_OUTPUT
source bench/ladder/lib.sh
out=${OUT:-results/gateway/picker}
ports=(8351 8352)
gw_port=8359
[[ -f $MODEL ]] || node bin/headroom.mjs model make --preset tiny --out "$MODEL"

declare -A flags=(
  [default]="--prefix-weight 2 --queue-weight 1 --kv-weight 1"
  [load-only]="--prefix-weight 0"
  [prefix-8]="--prefix-weight 8"
  [no-guard]="--saturation-queue 1000 --saturation-kv 1"
)

# one_run DIR ARM: two fresh replicas, a fresh gateway with the arm's flags, one open-loop run.
one_run() {
  local dir=$1 arm=$2 pids=() gw p ok=1
  mkdir -p "$dir"
  echo "before $(cut -d' ' -f1-3 /proc/loadavg)" >"$dir/loadavg.txt"
  for i in 0 1; do
    pids+=("$(start_headroom "${ports[$i]}" "$dir/replica-$i.log" --ctx-beyond-trained --prefix-cache on --admission off)")
  done
  for i in 0 1; do wait_ready "http://127.0.0.1:${ports[$i]}" /ready "${pids[$i]}" || ok=0; done
  if (( ok )); then
    # shellcheck disable=SC2086
    node bin/headroom.mjs gateway --host 127.0.0.1 --port $gw_port --upstream "http://127.0.0.1:${ports[0]}" \
      --upstream "http://127.0.0.1:${ports[1]}" --slo-ms "$SLO_MS" --max-output-tokens "$MAX_OUTPUT" --log-level warn \
      ${flags[$arm]} >"$dir/gateway.log" 2>&1 &
    gw=$!
    if wait_ready "http://127.0.0.1:$gw_port" /ready "$gw"; then
      bench_open "http://127.0.0.1:$gw_port" "$dir" "$RATE"
      curl -sf "http://127.0.0.1:$gw_port/stats" >"$dir/gateway-stats.json" || true
      for i in 0 1; do curl -sf "http://127.0.0.1:${ports[$i]}/metrics" >"$dir/replica-$i-metrics.txt" || true; done
    fi
    stop_server "$gw"
  fi
  for p in "${pids[@]}"; do stop_server "$p"; done
  echo "after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$dir/loadavg.txt"
}

read -r -a arms <<<"$ARMS"
for a in "${arms[@]}"; do [[ -n ${flags[$a]+x} ]] || { echo "unknown arm: $a" >&2; exit 2; }; done
k=0
for seed in $SEEDS; do
  export SEED=$seed
  n=${#arms[@]}
  for ((j = 0; j < n; j++)); do
    arm=${arms[$(((j + k) % n))]}
    dir=$out/seed-$seed/$arm
    if [[ -f $dir/summary.json ]]; then echo "skip $dir (done)"; continue; fi
    echo "run $dir ($(date +%H:%M:%S))"
    one_run "$dir" "$arm"
  done
  k=$((k + 1))
done
node --import tsx bench/gateway/picker-table.ts "$out" >"$out/README.md"
echo "wrote $out/README.md"
