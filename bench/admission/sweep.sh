#!/usr/bin/env bash
# The admission overload sweep: the same engine with admission off and with the conformal
# controller (at two guarantees, with and without the under-capacity shortcut), over a grid of
# offered rates from below saturation to well past it. Seed-major, then rate-major, arm order
# rotated per rate, a fresh server per run (trace rows kept per run: online coverage and the
# admitted rate over time come from them).
#
#   [SERVE_FLAGS="--runner mock --mock-speed 2 ..."] [OUT=dir] ARTIFACT=results/admission/llama-tiny-1t-native/e2e-gbdt.json \
#     CAL_TRACES=results/admission/llama-tiny-1t-native/collect/round-2 \
#     [ARMS="off conformal-95 conformal-95-headroom"] [SEEDS="7 8 9"] bash bench/admission/sweep.sh [rates...]
#     (DURATION_S=60; model and pool in bench/ladder/lib.sh)
#
# Arms: off (admit all); conformal-95 / conformal-80 (the bound alone: --admission-headroom off);
# conformal-95-headroom / conformal-80-headroom (the bound, then the shortcut, only with nothing queued);
# conformal-95-headroom-half (the shortcut up to half the sequence slots instead of a quarter);
# conformal-95-headroom-queue / conformal-80-headroom-queue (the shortcut also with requests waiting, reading the queue:
# the default since sweep-b); conformal-95-headroom-queue-warm (the same, deciding a made-up request every 20 ms so
# the decision path stays in cache: --admission-keep-warm-ms 20, the default since sweep-decision-b; the other
# arms then set it to 0, as they ran before; conformal-80-headroom-queue-warm and online-95-headroom-warm likewise);
# conformal-95-aci-headroom (ACI calibration instead of the rolling window, with the shortcut). Without ARTIFACT the
# conformal arms use the online baseline from a cold start; online-95-headroom(-warm) always does (online-95-headroom-warm is
# what `headroom serve` runs with no flags: the online baseline, rolling calibration, the shortcut, keep-warm);
# online-95-headroom-warm-selftrain is that with --admission-self-train on; default is no admission flag at all
# (whatever this checkout ships); default-arith adds --admission-arithmetic-bound on, default-99
# --admission-guarantee 0.99, default-selftrain --admission-self-train on, default-noprotect --admission-protect-running off. An arm tagged +before (default+before) runs the same flags from another
# checkout's CLI, BEFORE_BIN=<checkout>/bin/headroom.mjs: an A/B of two commits in one rotation.
# llama-server is llama.cpp's own server on the same model, threads, context and slots (start_llama in
# bench/ladder/lib.sh: LLAMA_SERVER=<binary from bench/peer/build-llama-server.sh>); it cannot be probed
# for a natural-length workload's EOS token, so such a sweep needs PEER_EOS="--eos-token-id N --vocab-size V"
# (the values any Headroom run of the same model records in meta.json, workload.natural_length).
# Output: $OUT/rate-<r>/<arm>/... with one seed, $OUT/seed-<s>/rate-<r>/<arm>/... with several;
# each run folder holds records.parquet, meta.json, summary.json, stats.json, trace.jsonl, server.log;
# $OUT/README.md is the table (bench/admission/table.ts). OUT defaults to a new
# results/runs/admission-sweep-<UTC time> (ignored by git; pass OUT=results/... to update a committed sweep).
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/ladder/lib.sh
read -r -a rates <<<"${*:-0.5 1 2 4}"
: "${DURATION_S:=60}"
: "${WORKLOAD:=chat}"
out=${OUT:-results/runs/admission-sweep-$(date -u +%Y-%m-%dT%H-%M-%SZ)}
mkdir -p "$out"
echo "sweep: writing to $out"
port=8331
: "${SERVE_FLAGS:=--scheduler continuous --kv paged --prefix-cache on}"
common="$SERVE_FLAGS --slo-ms $SLO_MS"
extra=""
if [[ -n "${ARTIFACT:-}" ]]; then
  extra="--admission-artifact $ARTIFACT"
  [[ -n "${CAL_TRACES:-}" ]] && extra="$extra --admission-calibration-traces $CAL_TRACES"
fi
declare -A flags=(
  [default]=""
  [default-arith]="--admission-arithmetic-bound on"
  [default-99]="--admission-guarantee 0.99"
  [default-noprotect]="--admission-protect-running off"
  [default-selftrain]="--admission-self-train on"
  [off]="--admission off"
  [conformal-95]="--admission conformal --admission-guarantee 0.95 --admission-headroom off $extra --admission-keep-warm-ms 0"
  [conformal-80]="--admission conformal --admission-guarantee 0.8 --admission-headroom off $extra --admission-keep-warm-ms 0"
  [conformal-95-headroom]="--admission conformal --admission-guarantee 0.95 --admission-headroom on --admission-headroom-queue off $extra --admission-keep-warm-ms 0"
  [conformal-80-headroom]="--admission conformal --admission-guarantee 0.8 --admission-headroom on --admission-headroom-queue off $extra --admission-keep-warm-ms 0"
  [conformal-95-headroom-half]="--admission conformal --admission-guarantee 0.95 --admission-headroom on --admission-headroom-queue off --admission-headroom-batch-share 0.5 $extra --admission-keep-warm-ms 0"
  [conformal-95-headroom-queue]="--admission conformal --admission-guarantee 0.95 --admission-headroom on --admission-headroom-queue on $extra --admission-keep-warm-ms 0"
  [conformal-95-headroom-queue-warm]="--admission conformal --admission-guarantee 0.95 --admission-headroom on --admission-headroom-queue on --admission-keep-warm-ms 20 $extra"
  [conformal-80-headroom-queue]="--admission conformal --admission-guarantee 0.8 --admission-headroom on --admission-headroom-queue on $extra --admission-keep-warm-ms 0"
  [conformal-80-headroom-queue-warm]="--admission conformal --admission-guarantee 0.8 --admission-headroom on --admission-headroom-queue on --admission-keep-warm-ms 20 $extra"
  [online-95-headroom-warm]="--admission conformal --admission-guarantee 0.95 --admission-headroom on --admission-headroom-queue on --admission-keep-warm-ms 20"
  [online-95-headroom-warm-selftrain]="--admission conformal --admission-guarantee 0.95 --admission-headroom on --admission-headroom-queue on --admission-keep-warm-ms 20 --admission-self-train on"
  [online-95-headroom]="--admission conformal --admission-guarantee 0.95 --admission-headroom on --admission-headroom-queue on --admission-keep-warm-ms 0"
  [conformal-95-aci-headroom]="--admission conformal --admission-guarantee 0.95 --admission-calibration aci --admission-headroom on --admission-headroom-queue off $extra --admission-keep-warm-ms 0"
)
read -r -a arms <<<"${ARMS:-off conformal-95 conformal-80}"
for arm in "${arms[@]}"; do
  if [[ $arm == llama-server ]]; then
    : "${LLAMA_SERVER:?set LLAMA_SERVER to the llama-server binary (bash bench/peer/build-llama-server.sh)}"
    if [[ $WORKLOAD == *natural* && -z ${PEER_EOS:-} ]]; then echo 'sweep: llama-server on a natural-length workload needs PEER_EOS="--eos-token-id N --vocab-size V"' >&2; exit 2; fi
  fi
done
read -r -a seeds <<<"${SEEDS:-$SEED}"
i=0
for seed in "${seeds[@]}"; do
for rate in "${rates[@]}"; do
  for k in "${!arms[@]}"; do
    arm=${arms[$(( (k + i) % ${#arms[@]} ))]}
    base=${arm%+before}
    [[ $arm == llama-server || -n "${flags[$base]+x}" ]] || { echo "unknown arm $arm" >&2; exit 2; }
    checkout_for "$arm"
    if (( ${#seeds[@]} > 1 )); then dir=$out/seed-$seed/rate-$rate/$arm; else dir=$out/rate-$rate/$arm; fi
    mkdir -p "$dir"
    rm -f "$dir/trace.jsonl"
    # shellcheck disable=SC2086
    if [[ $arm == llama-server ]]; then
      SEED=$seed WORKLOAD=$WORKLOAD BENCH_FLAGS=${PEER_EOS:-} run_peer $port "$dir" "$rate" llama-server
      echo "seed $seed rate $rate $arm done"
      continue
    fi
    pid=$(start_headroom $port "$dir/server.log" $common ${flags[$base]} --trace-out "$dir/trace.jsonl")
    if wait_ready "http://127.0.0.1:$port" /ready "$pid"; then
      SEED=$seed WORKLOAD=$WORKLOAD bench_open "http://127.0.0.1:$port" "$dir" "$rate"
      curl -sf "http://127.0.0.1:$port/stats" >"$dir/stats.json" || true
      curl -sf "http://127.0.0.1:$port/metrics" >"$dir/metrics.txt" || true
    fi
    stop_server "$pid"
    echo "seed $seed rate $rate $arm done"
  done
  i=$((i + 1))
done
done
node --import tsx bench/admission/table.ts "$out" >"$out/README.md"
