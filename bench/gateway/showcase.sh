#!/usr/bin/env bash
# The gateway-mode admission showcase (docs/gateway.md, "Admission in front of llama-server"):
# llama.cpp's own llama-server alone against Headroom's gateway with admission control in front of
# it, on the same model, threads and pool, under the same open-loop load.
#
#   LLAMA_SERVER=/path/to/llama-server PHASE=<phase> bash bench/gateway/showcase.sh [rates...]
#
# Phases, in order (each reads what the one before wrote under $OUT):
#   saturation  llama-server alone at each rate (default 0.5 1 2 3 4): its goodput curve; the
#               rate of its peak goodput is PEAK_RATE, its saturation rate.
#   collect     the gateway, admission off, writing traces (--trace-out) in front of a fresh
#               llama-server at each rate (default 0.5x–3x of saturation); then
#               `headroom admission train --runner gateway` fits the E2E predictor on them.
#   showcase    SEEDS × three arms, order rotated per seed, a fresh llama-server (and gateway) per
#               run: llama-server alone at PEAK_RATE (its own peak goodput, measured in this run),
#               llama-server alone at OVER_RATE, and the gateway with admission (the artifact, warm-
#               started on the collected traces) in front of llama-server at OVER_RATE.
#   Then: node --import tsx bench/gateway/showcase-table.ts $OUT
#
# Topology: client → [gateway :8341] → chat-proxy :8321 → llama-server :8322. chat-proxy
# (bench/peer/chat-proxy.ts) bans the byte-fallback tokens a random-weight model emits, which
# llama-server would otherwise fail as malformed UTF-8; both arms have it.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${MODEL:=models/tiny.gguf}" "${THREADS:=1}" "${CTX:=8192}" "${PARALLEL:=8}" "${TOKENS_PER_WORD:=1.14}" "${SLO_MS:=4000}"
: "${DURATION_S:=40}" "${WORKLOAD:=chat}" "${MAX_OUTPUT:=512}"
export MODEL THREADS CTX PARALLEL TOKENS_PER_WORD SLO_MS DURATION_S WORKLOAD MAX_OUTPUT
source bench/ladder/lib.sh
: "${LLAMA_SERVER:?set LLAMA_SERVER to the llama-server binary (bench/peer/build-llama-server.sh)}"
: "${PHASE:?set PHASE to saturation, collect or showcase}"
out=${OUT:-results/gateway/showcase}
# Where the collect phase's traces and artifact are (another OUT may reuse them for another rate).
artifacts=${ARTIFACTS:-$out}
port=8321
gw_port=8341
[[ -f $MODEL ]] || node bin/headroom.mjs model make --preset tiny --out "$MODEL"

# start_gateway LOG FLAGS...: the gateway in front of chat-proxy; prints the pid.
start_gateway() {
  local log=$1; shift
  node bin/headroom.mjs gateway --host 127.0.0.1 --port $gw_port --upstream "http://127.0.0.1:$port" \
    --slo-ms "$SLO_MS" --max-output-tokens "$MAX_OUTPUT" --log-level warn "$@" >"$log" 2>&1 &
  echo $!
}

# one_run DIR RATE SYSTEM [GATEWAY FLAGS...]: a fresh llama-server (+ proxy, + gateway), one open-loop run.
one_run() {
  local dir=$1 rate=$2 system=$3 pid proxy gw=; shift 3
  mkdir -p "$dir"
  echo "before $(cut -d' ' -f1-3 /proc/loadavg)" >"$dir/loadavg.txt"
  read -r pid proxy < <(start_llama "$port" "$dir/llama-server.log" --metrics)
  local url=http://127.0.0.1:$port ready=/health
  if wait_ready "$url" /health "$pid"; then
    if [[ $system == gateway ]]; then
      gw=$(start_gateway "$dir/gateway.log" "$@")
      url=http://127.0.0.1:$gw_port
      ready=/ready
    fi
    if wait_ready "$url" "$ready" "${gw:-$pid}"; then
      bench_open "$url" "$dir" "$rate"
      if [[ -n $gw ]]; then curl -sf "$url/stats" >"$dir/stats.json" || true; curl -sf "$url/metrics" >"$dir/metrics.txt" || true; fi
    fi
  fi
  if [[ -n $gw ]]; then stop_server "$gw"; fi
  stop_server "$pid"
  stop_server "$proxy"
  echo "after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$dir/loadavg.txt"
}

case $PHASE in
  saturation)
    read -r -a rates <<<"${*:-0.5 1 2 3 4}"
    for rate in "${rates[@]}"; do
      one_run "$out/saturation/rate-$rate" "$rate" llama-server
      node -e 'const s = require(process.argv[1]); console.log("saturation: rate " + process.argv[2] + ": goodput " + s.request_goodput.toFixed(3) + "/s, p99 E2E " + Math.round(s.p99_e2el_ms) + " ms")' "$PWD/$out/saturation/rate-$rate/summary.json" "$rate" || true
    done
    ;;
  collect)
    read -r -a rates <<<"${*:?give the collection rates, e.g. 0.5x to 3x of saturation}"
    : "${ROUNDS:=2}"
    n=${#rates[@]}
    for round in $(seq 0 $((ROUNDS - 1))); do
      for k in $(seq 0 $((n - 1))); do
        rate=${rates[$(( (k + round) % n ))]}
        dir=$out/collect/round-$round/rate-$rate
        rm -f "$dir/trace.jsonl"
        SEED=$((SEED + 1000 * round)) one_run "$dir" "$rate" gateway --admission off --trace-out "$dir/trace.jsonl"
        echo "collect: round $round rate $rate: $(wc -l <"$dir/trace.jsonl" 2>/dev/null || echo 0) trace rows"
      done
    done
    node bin/headroom.mjs admission train --traces "$out/collect" --runner gateway --quantile 0.5 --out "$out/e2e-gbdt.json"
    ;;
  showcase)
    : "${PEAK_RATE:?set PEAK_RATE (the peak-goodput rate of llama-server, from the saturation phase)}"
    : "${OVER_RATE:?set OVER_RATE (3x saturation)}"
    read -r -a seeds <<<"${SEEDS:-1 2 3}"
    arms=(llama-peak llama-over gateway)
    i=0
    for seed in "${seeds[@]}"; do
      for k in 0 1 2; do
        arm=${arms[$(( (k + i) % 3 ))]}
        dir=$out/showcase/seed-$seed/$arm
        case $arm in
          llama-peak) SEED=$seed one_run "$dir" "$PEAK_RATE" llama-server ;;
          llama-over) SEED=$seed one_run "$dir" "$OVER_RATE" llama-server ;;
          gateway) SEED=$seed one_run "$dir" "$OVER_RATE" gateway --admission conformal --admission-artifact "$artifacts/e2e-gbdt.json" \
            --admission-calibration-traces "$artifacts/collect" --trace-out "$dir/trace.jsonl" ${GATEWAY_FLAGS:-} ;;
        esac
        echo "showcase: seed $seed $arm done"
      done
      i=$((i + 1))
    done
    ;;
  *) echo "unknown PHASE $PHASE" >&2; exit 2 ;;
esac
