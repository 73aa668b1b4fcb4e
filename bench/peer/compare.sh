#!/usr/bin/env bash
# Headroom rung 4 against llama.cpp's own llama-server: the same GGUF (MODEL), the same thread
# count (THREADS), the same unified KV pool (CTX cells, PARALLEL sequences/slots), the same
# open-loop shared-prefix chat workload (Poisson, seeded, warm-up flagged, client timeout 5x the
# SLO). Rate-major, the two configurations' order alternates per rate, a fresh server per run.
# Results: results/peer/rate-<r>/{headroom-r4,llama-server}/ and report.txt beside them.
#
#   LLAMA_SERVER=/path/to/llama-server bash bench/peer/compare.sh [rates...]   (DURATION_S=40)
#
# CONFIGS picks and orders the configurations (default "headroom-r4 llama-server"); also known:
# headroom-r4-df, rung 4 with --priority decode-first (decodes take the step budget before any
# prompt chunk, so a stream never waits for more than one step); headroom-admit, rung 4 with the prefix cache's host tier
# (--cache-host-tokens $HOST_TOKENS, default 65536) and told the SLO
# (--slo-ms $SLO_MS; otherwise admission budgets the serve default, 10 s) and, with ARTIFACT set,
# warm-started from an artifact trained on this workload (--admission-artifact, calibrated on
# CAL_TRACES when set; docs/per-token.md shows the collection); headroom-admit-pool, the same with
# --inline-step-ms 0 (every step on a libuv pool thread, the default before inline steps);
# headroom-admit-keep, the same with --cache-max-fraction 1 (idle prefixes stay in the pool: the
# default with the host tier before docs/per-token.md §15). <config>+before runs that configuration
# from another checkout, BEFORE_BIN=<checkout>/bin/headroom.mjs (an A/B of two commits per rate).
#
# llama-server is built outside the repo (bench/peer/README.md). Its settings beyond the matched
# ones are its defaults (-b 2048 -ub 512, cache_prompt on, --cache-ram 8192 MiB host prompt cache,
# --cache-idle-slots, slot prompt similarity 0.1, --cache-reuse 0); the README lists them.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/ladder/lib.sh
: "${LLAMA_SERVER:?set LLAMA_SERVER to the llama-server binary (see bench/peer/README.md)}"
read -r -a rates <<<"${*:-0.5 1 2 3}"
: "${DURATION_S:=40}" "${HOST_TOKENS:=65536}"
port=8321
out=${OUT:-results/peer}
read -r -a configs <<<"${CONFIGS:-headroom-r4 llama-server}"
n=${#configs[@]}
warm_start

i=0
for rate in "${rates[@]}"; do
  for (( k = 0; k < n; k++ )); do
    cfg=${configs[$(( (k + i) % n ))]}
    dir=$out/rate-$rate/$cfg
    checkout_for "$cfg"
    case ${cfg%%+*} in
      headroom-r4) run_peer $port "$dir" "$rate" headroom --scheduler continuous --kv paged --prefix-cache on ;;
      headroom-r4-df) run_peer $port "$dir" "$rate" headroom --scheduler continuous --kv paged --prefix-cache on --priority decode-first ;;
      headroom-admit) run_peer $port "$dir" "$rate" headroom --scheduler continuous --kv paged --prefix-cache on --cache-host-tokens "$HOST_TOKENS" --slo-ms "$SLO_MS" "${warm[@]}" ;;
      headroom-admit-pool) run_peer $port "$dir" "$rate" headroom --scheduler continuous --kv paged --prefix-cache on --cache-host-tokens "$HOST_TOKENS" --slo-ms "$SLO_MS" "${warm[@]}" --inline-step-ms 0 ;;
      headroom-admit-keep) run_peer $port "$dir" "$rate" headroom --scheduler continuous --kv paged --prefix-cache on --cache-host-tokens "$HOST_TOKENS" --slo-ms "$SLO_MS" "${warm[@]}" --cache-max-fraction 1 ;;
      *) run_peer $port "$dir" "$rate" llama-server ;;
    esac
    echo "rate $rate $cfg done ($(tr '\n' ' ' <"$dir/loadavg.txt"))"
  done
  i=$((i + 1))
done
node bin/headroom.mjs bench report "$out"/rate-*/* --slo "$SLO_MS" >"$out/report.txt" || true
