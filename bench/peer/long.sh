#!/usr/bin/env bash
# Headroom against llama-server on long prompts (issue 11): the `long` workload (src/harness/
# workloads.ts: half the requests on 2 shared documents of 1,000–1,500 tokens plus a 100–900-token
# question, half unique documents of 800–2,800 tokens, outputs of 8–256 tokens), the tiny model,
# THREADS threads, one unified pool of CTX cells shared by PARALLEL sequences/slots, open-loop
# Poisson. Seed-major, then rate; the configurations' order rotates per run; a fresh server per run.
# Results: $OUT/seed-<s>/rate-<r>/<config>/; table: bench/peer/long-table.ts.
#
#   LLAMA_SERVER=/path/to/llama-server bash bench/peer/long.sh [rates...]   (SEEDS="1 2 3" DURATION_S=40)
#
# CONFIGS (default "headroom llama-server"); also known: headroom-host, Headroom with the prefix
# cache's host tier (--cache-host-tokens $HOST_TOKENS, default 65536); headroom-host-pin, the same with
# --pin-threads on; headroom-host-onecall, the same with --split-steps off (every step one llama_decode
# call, decoding rows batched with prompt chunks: the default before per-token §19); headroom-host-lean, headroom-host with --cache-max-fraction 0 (the pool keeps
# nothing idle: an idle prefix waits in host memory only, as llama-server's idle slots do in its
# --cache-ram; the default with the host tier since per-token §15); headroom-host-keep, headroom-host
# with --cache-max-fraction 1 (idle prefixes stay in the pool: the default before §15);
# headroom-admit, headroom-host told the
# SLO (--slo-ms $SLO_MS; otherwise admission budgets the serve default, 10 s) and, with ARTIFACT set, warm-
# started from an artifact trained on this workload (--admission-artifact $ARTIFACT, calibrated on
# CAL_TRACES when set; collect them with bench/admission/collect.sh, WORKLOAD=long, as docs/per-token.md shows);
# headroom-admit-keep, headroom-admit with --cache-max-fraction 1;
# headroom-overlap, headroom-admit with --overlap-dispatch on; headroom-lean, headroom-admit with
# --cache-max-fraction 0 (nothing idle kept in the pool: idle prefixes wait in host memory only;
# the same as headroom-admit since per-token §15);
# headroom-chunk, headroom-admit with --prefill-chunk $CHUNK (default 2048: as llama-server, a new
# prompt goes in whole beside the decoding requests instead of 256 tokens a step); headroom-inline,
# headroom-lean with --inline-step-ms $INLINE_MS (default 5: steps that short run on the event-loop
# thread, without the two thread hand-offs; the serve default since); headroom-pool, headroom-admit
# with --inline-step-ms 0 (every step on a libuv pool thread, the default before); headroom-budget,
# headroom-admit with --step-target-ms $STEP_TARGET (default auto: the step-time budget). Any of them
# followed by +<tag> (e.g. llama-server+b) is run again as a replica: its ratio to the original is
# the comparison's noise floor; the tag `before` (e.g. headroom-admit+before) runs it from another
# checkout, BEFORE_BIN=<checkout>/bin/headroom.mjs: an A/B of two commits in one rotation.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${MODEL:=models/tiny.gguf}" "${CTX:=16384}" "${PARALLEL:=8}" "${TOKENS_PER_WORD:=1.14}" "${SLO_MS:=4000}" "${DURATION_S:=40}"
: "${MAX_OUTPUT:=512}" "${WORKLOAD:=long}" "${HOST_TOKENS:=65536}" "${CHUNK:=2048}" "${INLINE_MS:=5}" "${STEP_TARGET:=auto}"
export MODEL CTX PARALLEL TOKENS_PER_WORD SLO_MS DURATION_S MAX_OUTPUT WORKLOAD
source bench/ladder/lib.sh
: "${LLAMA_SERVER:?set LLAMA_SERVER to the llama-server binary (see bench/peer/README.md)}"
read -r -a rates <<<"${*:-0.25 0.6 1.2}"
read -r -a seeds <<<"${SEEDS:-1 2 3}"
out=${OUT:-results/per-token/peer-long}
port=8321
[[ -f $MODEL ]] || node bin/headroom.mjs model make --preset tiny --out "$MODEL"
read -r -a configs <<<"${CONFIGS:-headroom llama-server}"
warm_start
# headroom-admit's flags, which the variants below add to.
admit=(--ctx-beyond-trained --cache-host-tokens "$HOST_TOKENS" --slo-ms "$SLO_MS" "${warm[@]}")
n=${#configs[@]}
k=0
for seed in "${seeds[@]}"; do
  export SEED=$seed
  for rate in "${rates[@]}"; do
    for ((j = 0; j < n; j++)); do
      cfg=${configs[$(((j + k) % n))]}
      dir=$out/seed-$seed/rate-$rate/$cfg
      # <config>+<tag>: a replica, the same configuration run again in the rotation (the table pairs
      # it with its original: what the ratios read for two identical systems).
      checkout_for "$cfg"
      case ${cfg%%+*} in
        headroom) run_peer $port "$dir" "$rate" headroom --ctx-beyond-trained ;;
        headroom-host) run_peer $port "$dir" "$rate" headroom --ctx-beyond-trained --cache-host-tokens "$HOST_TOKENS" ;;
        headroom-host-pin) run_peer $port "$dir" "$rate" headroom --ctx-beyond-trained --cache-host-tokens "$HOST_TOKENS" --pin-threads on ;;
        headroom-host-onecall) run_peer $port "$dir" "$rate" headroom --ctx-beyond-trained --cache-host-tokens "$HOST_TOKENS" --split-steps off ;;
        headroom-host-keep) run_peer $port "$dir" "$rate" headroom --ctx-beyond-trained --cache-host-tokens "$HOST_TOKENS" --cache-max-fraction 1 ;;
        headroom-host-lean) run_peer $port "$dir" "$rate" headroom --ctx-beyond-trained --cache-host-tokens "$HOST_TOKENS" --cache-max-fraction 0 ;;
        headroom-admit) run_peer $port "$dir" "$rate" headroom "${admit[@]}" ;;
        headroom-admit-keep) run_peer $port "$dir" "$rate" headroom "${admit[@]}" --cache-max-fraction 1 ;;
        headroom-overlap) run_peer $port "$dir" "$rate" headroom "${admit[@]}" --overlap-dispatch on ;;
        headroom-lean) run_peer $port "$dir" "$rate" headroom "${admit[@]}" --cache-max-fraction 0 ;;
        headroom-inline) run_peer $port "$dir" "$rate" headroom "${admit[@]}" --cache-max-fraction 0 --inline-step-ms "$INLINE_MS" ;;
        headroom-pool) run_peer $port "$dir" "$rate" headroom "${admit[@]}" --inline-step-ms 0 ;;
        headroom-chunk) run_peer $port "$dir" "$rate" headroom "${admit[@]}" --prefill-chunk "$CHUNK" ;;
        headroom-budget) run_peer $port "$dir" "$rate" headroom "${admit[@]}" --step-target-ms "$STEP_TARGET" ;;
        llama-server) run_peer $port "$dir" "$rate" llama-server ;;
        *) echo "unknown config $cfg" >&2; exit 2 ;;
      esac
      echo "seed $seed rate $rate $cfg done ($(tr '\n' ' ' <"$dir/loadavg.txt"))"
    done
    k=$((k + 1))
  done
done
