#!/usr/bin/env bash
# The host's jitter floor: one spinning thread per CPU (bench/host/jitter.c, each bound to its CPU
# with taskset), all at once for SECONDS_EACH seconds, REPS times. What a spinner loses on an otherwise idle
# host is what a decode step, whose threads meet at barriers, loses too; docs/per-token.md compares
# it with a stream's worst inter-token gap.
#
#   bash bench/host/jitter.sh [out.jsonl]      (SECONDS_EACH=30 REPS=3 CPUS="all online CPUs")
# CHRT: a scheduling policy for the spinners, as chrt's arguments (e.g. CHRT="-f 50" for SCHED_FIFO,
# which needs the privilege; keep SECONDS_EACH under 1, or the kernel's real-time throttle, 50 ms a
# second by default, shows up as the gaps). PAUSE: seconds between rounds (give the throttle's window
# time to pass: PAUSE=1 with CHRT).
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
    # shellcheck disable=SC2086
    taskset -c "$c" ${CHRT:+chrt $CHRT} "$bin" "$SECONDS_EACH" "cpu$c-r$r" >>"$out" &
    pids+=($!)
  done
  wait "${pids[@]}"
  sleep "${PAUSE:-0}"
done
rm -rf "$(dirname "$bin")"
