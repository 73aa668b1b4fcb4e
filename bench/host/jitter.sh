#!/usr/bin/env bash
# The host's jitter floor: one spinning thread per CPU (bench/host/jitter.c, each bound to its CPU
# with taskset), all at once for SECONDS, REPS times. What a spinner loses on an otherwise idle
# host is what a decode step, whose threads meet at barriers, loses too; docs/per-token.md compares
# it with a stream's worst inter-token gap.
#
#   bash bench/host/jitter.sh [out.jsonl]      (SECONDS_EACH=30 REPS=3 CPUS="all online CPUs")
set -euo pipefail
cd "$(dirname "$0")"
: "${SECONDS_EACH:=30}" "${REPS:=3}"
read -r -a cpus <<<"${CPUS:-$(seq -s' ' 0 $(( $(nproc) - 1 )))}"
bin=$(mktemp -d)/jitter
cc -O2 -o "$bin" jitter.c
out=${1:-/dev/stdout}
for (( r = 0; r < REPS; r++ )); do
  pids=()
  for c in "${cpus[@]}"; do
    taskset -c "$c" "$bin" "$SECONDS_EACH" "cpu$c-r$r" >>"$out" &
    pids+=($!)
  done
  wait "${pids[@]}"
done
rm -rf "$(dirname "$bin")"
