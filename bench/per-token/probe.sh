#!/usr/bin/env bash
# One per-request probe (bench/per-token/probe.mjs) against a fresh server, one server at a time:
# SYSTEM `headroom` (the comparison's headroom-host flags: --ctx-beyond-trained --cache-host-tokens
# 65536, plus HFLAGS) or `llama-server` (behind bench/peer/chat-proxy.ts, as in bench/peer/long.sh).
# The same model, threads and pool as bench/peer/long.sh.
#
#   LLAMA_SERVER=/path/to/llama-server bash bench/per-token/probe.sh SYSTEM MODE [N]
#   e.g. for s in headroom llama-server headroom llama-server; do bash bench/per-token/probe.sh $s solo 10; done
set -euo pipefail
cd "$(dirname "$0")/../.."
system=$1 mode=$2 n=${3:-8}
: "${MODEL:=models/tiny.gguf}" "${CTX:=16384}" "${PARALLEL:=8}" "${MAX_OUTPUT:=512}" "${THREADS:=2}" "${PORT:=8400}"
export MODEL CTX PARALLEL MAX_OUTPUT THREADS
source bench/ladder/lib.sh
[[ -f $MODEL ]] || node bin/headroom.mjs model make --preset tiny --out "$MODEL"
log=$(mktemp -d)
if [[ $system == headroom ]]; then
  # shellcheck disable=SC2086  # HFLAGS is a list of flags
  pid=$(start_headroom "$PORT" "$log/server.log" --ctx-beyond-trained --cache-host-tokens 65536 ${HFLAGS:-})
  wait_ready "http://127.0.0.1:$PORT" /ready "$pid"
  url=http://127.0.0.1:$PORT server=$pid proxy=
else
  : "${LLAMA_SERVER:?set LLAMA_SERVER to the llama-server binary (see bench/peer/README.md)}"
  read -r pid proxy < <(start_llama "$PORT" "$log/server.log")
  wait_ready "http://127.0.0.1:$PORT" /health "$pid"
  # `after` watches the server itself, so it talks to it directly (the proxy would add its own CPU).
  url=http://127.0.0.1:$PORT server=$pid
  [[ $mode == after ]] && url=http://127.0.0.1:$((PORT + 1))
fi
echo -n "$system: "
PID=$server node bench/per-token/probe.mjs "$url" "$mode" "$n" || echo "probe failed (server log: $log/server.log)"
stop_server "$pid"
if [[ -n $proxy ]]; then stop_server "$proxy"; fi
