#!/bin/sh
# The image's entrypoint: turns the container's environment into a `headroom serve` (engine mode)
# or `headroom gateway` command line and execs it, so node is PID 1 and receives SIGTERM itself
# (a shell in between would swallow it and the drain would never start).
#
#   HEADROOM_MODE           engine (default) or gateway; a first argument `serve`/`engine` or
#                           `gateway` overrides it. Any other first argument that is not an option
#                           (sh, node, ...) is run as given, for debugging the image.
#   HEADROOM_THREADS        llama.cpp threads (engine mode). Unset: the container's CPU limit
#                           (cgroup v2 cpu.max, else cgroup v1's CFS quota), rounded up, at most the
#                           CPUs this process may run on (nproc), at least 1. llama.cpp's threads
#                           spin-wait for each other, so more threads than the CPUs the container
#                           gets is much slower, never faster (docs/operations.md).
#   HEADROOM_MODEL          the GGUF file (engine mode; the image sets its generated tiny model).
#   HEADROOM_MODEL_SHA256   if set, the model's sha256 must match or the container exits 1 before
#                           serving (a mounted model that is not the one meant).
#   HEADROOM_CGROUP_CPU_MAX where to read cgroup v2's cpu.max (default /sys/fs/cgroup/cpu.max).
#   HEADROOM_GATEWAY_OLD_SPACE_MB  gateway mode: node's --initial-old-space-size (default 256; 0: node's
#                           own default), so that full garbage collections come minutes apart.
#
# Every other option is the CLI's own environment (HEADROOM_<FLAG> for serve,
# HEADROOM_GATEWAY_<FLAG> for gateway, HEADROOM_CONFIG / HEADROOM_GATEWAY_CONFIG for a YAML file),
# or arguments after the mode: `docker run IMAGE --slo-ms 5000`, `docker run IMAGE gateway
# --upstream http://engine:8000`. Exit codes are the CLI's (0 drained, 1 could not start, 2 drain
# deadline passed, 3 second signal, 70 engine failure).
set -eu

app_root=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)

say() {
  printf 'headroom-entrypoint: %s\n' "$*" >&2
}

# The CPU limit as a whole number of CPUs, rounded up; empty when there is none.
cpu_limit() {
  cpu_max=${HEADROOM_CGROUP_CPU_MAX:-/sys/fs/cgroup/cpu.max}
  if [ -r "$cpu_max" ]; then
    read -r quota period < "$cpu_max" || true
    if [ "${quota:-max}" != max ] && [ "${period:-0}" -gt 0 ]; then
      echo $(((quota + period - 1) / period))
    fi
    return 0
  fi
  v1=/sys/fs/cgroup/cpu
  if [ -r "$v1/cpu.cfs_quota_us" ] && [ -r "$v1/cpu.cfs_period_us" ]; then
    quota=$(cat "$v1/cpu.cfs_quota_us")
    period=$(cat "$v1/cpu.cfs_period_us")
    if [ "$quota" -gt 0 ] && [ "$period" -gt 0 ]; then
      echo $(((quota + period - 1) / period))
    fi
  fi
}

mode=${HEADROOM_MODE:-engine}
case "${1:-}" in
  serve | engine) mode=engine; shift ;;
  gateway) mode=gateway; shift ;;
  '' | -*) ;;
  *) exec "$@" ;;
esac

case "$mode" in
  engine)
    if [ -z "${HEADROOM_THREADS:-}" ]; then
      cpus=$(nproc)
      limit=$(cpu_limit)
      threads=${limit:-$cpus}
      [ "$threads" -le "$cpus" ] || threads=$cpus
      [ "$threads" -ge 1 ] || threads=1
      HEADROOM_THREADS=$threads
      export HEADROOM_THREADS
      say "engine mode: ${threads} llama.cpp threads (CPU limit: ${limit:-none}; CPUs available: ${cpus})"
    else
      say "engine mode: ${HEADROOM_THREADS} llama.cpp threads (HEADROOM_THREADS)"
    fi
    if [ -n "${HEADROOM_MODEL_SHA256:-}" ]; then
      model=${HEADROOM_MODEL:-$app_root/models/tiny.gguf}
      if [ ! -r "$model" ]; then
        say "error: model file not found: $model"
        exit 1
      fi
      have=$(sha256sum "$model" | cut -d' ' -f1)
      if [ "$have" != "$HEADROOM_MODEL_SHA256" ]; then
        say "error: $model has sha256 $have, expected $HEADROOM_MODEL_SHA256 (HEADROOM_MODEL_SHA256)"
        exit 1
      fi
      say "model $model: sha256 matches"
    fi
    exec node "$app_root/bin/headroom.mjs" serve "$@"
    ;;
  gateway)
    # The gateway's p99 was its own full garbage collections, one every few seconds while the old
    # generation was small (docs/gateway.md); starting it at this size makes them minutes apart.
    old_space=${HEADROOM_GATEWAY_OLD_SPACE_MB:-256}
    case "$old_space" in
      '' | *[!0-9]*)
        say "error: HEADROOM_GATEWAY_OLD_SPACE_MB: expected a whole number of MB, got '$old_space'"
        exit 1
        ;;
    esac
    if [ "$old_space" -gt 0 ]; then
      say "gateway mode (node --initial-old-space-size=${old_space})"
      exec node "--initial-old-space-size=$old_space" "$app_root/bin/headroom.mjs" gateway "$@"
    fi
    say 'gateway mode'
    exec node "$app_root/bin/headroom.mjs" gateway "$@"
    ;;
  *)
    say "error: HEADROOM_MODE: expected engine or gateway, got '$mode'"
    exit 1
    ;;
esac
