#!/usr/bin/env bash
# A first run of ablation rungs 1–4 on the generated tiny model, shared-prefix chat workload,
# open-loop Poisson arrivals. Rate-major, configuration order rotated per rate, server restarted
# per run (DESIGN.md "Measurement"). Results land in results/ladder/first-run/<rate>/<rung>/.
#
#   bash bench/ladder/first-run.sh [rates...]      (default: 1 3 6 rps, 30 s each)
set -euo pipefail
cd "$(dirname "$0")/../.."
rates=("${@:-1 3 6}"); read -r -a rates <<<"${rates[*]}"
duration=${DURATION_S:-30}
slo=${SLO_MS:-2000}
port=8311
out=results/ladder/first-run
declare -A flags=(
  [1-fifo]="--scheduler fifo"
  [2-static]="--scheduler static --static-batch 8 --static-wait-ms 50 --kv paged --prefix-cache off"
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
    # shellcheck disable=SC2086
    node bin/headroom.mjs serve --port $port --host 127.0.0.1 --threads 2 --ctx 8192 --parallel 16 --max-output-tokens 512 ${flags[$rung]} >"$dir/server.log" 2>&1 &
    pid=$!
    until curl -sf "localhost:$port/ready" >/dev/null; do sleep 0.5; done
    node bin/headroom.mjs bench run --url "http://127.0.0.1:$port" --model tiny --workload chat --rate "$rate" \
      --duration-s "$duration" --warmup-s 5 --timeout-s 30 --seed 7 --slo "$slo" --out "$dir" --no-progress --json >"$dir/summary.json" || true
    kill -TERM $pid; wait $pid || true
    echo "rate $rate $rung done"
  done
  i=$((i + 1))
done
node bin/headroom.mjs bench report $out/rate-*/* --slo "$slo" > $out/report.txt || true
