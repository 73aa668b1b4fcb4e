#!/usr/bin/env bash
# A decoding stream's ITL while a ~6,000-token prompt prefills (bench/per-token/long-prefill-itl.ts),
# one fresh server per configuration, configurations alternating:
#   fixed    the defaults: every step capped at --prefill-chunk 256 tokens (rows aligned to 64)
#   budget   the experimental step-time budget: --step-target-ms auto --batch-tokens 2048
#   target   the same budget with an explicit target: --step-target-ms $TARGET_MS (default 10) --batch-tokens 2048
#   tight    an explicit target whose chunks may shrink below 64 rows: --step-target-ms $TIGHT_MS (default 6)
#            --step-min-chunk $MIN_CHUNK (default 1) --batch-tokens 2048
#   tpot     the defaults, stream A sending x-slo-tpot-ms $TPOT_MS (default 10): the step budget holds the
#            steps that carry A within it (B sends a 120 s x-slo-ms)
#   tpot-pin the same with --pin-threads on
#   tpot-pin-onecall the same with --split-steps off (each step one llama_decode call, per-token §19)
#   llama-server  LLAMA_SERVER with -c 8192 -np 16 --kv-unified (Headroom's default pool), behind
#            bench/peer/chat-proxy.ts as in bench/peer/
#   before   BEFORE_BIN (bin/headroom.mjs of another checkout, built there: the "before") with its defaults
#
#   bash bench/per-token/long-prefill.sh [out-dir]      (ROUNDS=2 REPS=3 THREADS=2 LEAD=30 CONFIGS="fixed budget")
# LEAD: stream A's tokens before B is sent (its ITL alone is measured on those and on the ones after B).
# SERVER_FLAGS: more flags for every Headroom server (e.g. "--record DIR" is given per run by RECORD=1:
# $out/<config>-r<round>.rec, the flight recording that long-prefill-gaps.ts reads).
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/ladder/lib.sh
out=${1:-results/per-token/long-prefill}
: "${ROUNDS:=2}" "${REPS:=3}"
read -r -a configs <<<"${CONFIGS:-fixed budget}"
port=8321
mkdir -p "$out"
for (( r = 0; r < ROUNDS; r++ )); do
  for cfg in "${configs[@]}"; do
    bin=bin/headroom.mjs
    case $cfg in
      fixed) flags=() ;;
      budget) flags=(--step-target-ms auto --batch-tokens 2048) ;;
      target) flags=(--step-target-ms "${TARGET_MS:-10}" --batch-tokens 2048) ;;
      tight) flags=(--step-target-ms "${TIGHT_MS:-6}" --step-min-chunk "${MIN_CHUNK:-1}" --batch-tokens 2048) ;;
      tpot) flags=() ;;
      tpot-pin) flags=(--pin-threads on) ;;
      tpot-pin-onecall) flags=(--pin-threads on --split-steps off) ;;
      before) flags=(); bin=${BEFORE_BIN:?set BEFORE_BIN for the before configuration} ;;
      llama-server) bin= ;;
      *) echo "unknown configuration $cfg" >&2; exit 2 ;;
    esac
    log="$out/$cfg-r$r.log"
    extra=()
    if [[ $cfg == tpot* ]]; then extra=(--tpot-ms "${TPOT_MS:-10}"); fi
    proxy=
    if [[ -z $bin ]]; then
      : "${LLAMA_SERVER:?set LLAMA_SERVER for the llama-server configuration}"
      read -r pid proxy < <(MODEL=models/tiny.gguf CTX=8192 PARALLEL=16 start_llama $port "$log")
      ready=/health
    else
      read -r -a more <<<"${SERVER_FLAGS:-}"
      if [[ ${RECORD:-0} == 1 ]]; then rm -rf "$out/$cfg-r$r.rec"; more+=(--record "$out/$cfg-r$r.rec"); fi
      node "$bin" serve --host 127.0.0.1 --port $port --threads "$THREADS" --max-output-tokens 4096 "${flags[@]}" "${more[@]}" >"$log" 2>&1 &
      pid=$!
      ready=/ready
    fi
    if wait_ready "http://127.0.0.1:$port" $ready "$pid"; then
      echo "== $cfg round $r (load $(cut -d' ' -f1-3 /proc/loadavg))"
      node --import tsx bench/per-token/long-prefill-itl.ts --url "http://127.0.0.1:$port" --tokens-per-word 1.14 --reps "$REPS" --lead "${LEAD:-30}" "${extra[@]}" --json "$out/$cfg-r$r.json"
    fi
    stop_server "$pid"
    if [[ -n $proxy ]]; then stop_server "$proxy"; fi
  done
done
