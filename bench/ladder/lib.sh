# Shared by bench/ladder/*.sh and bench/peer/*.sh (source it; not executable on its own).
# Starts one server process, waits until it answers, stops it. Every run gets a fresh process
# (DESIGN.md "Measurement": server restarted per run), so no run inherits another's KV or caches.

# Common workload for every run of the ladder and the peer comparison. Changing one of these
# changes every result; each run's meta.json records what was actually used.
: "${MODEL:=models/small-q8_0.gguf}"   # the GGUF both systems serve
: "${THREADS:=2}"                      # model threads (the machine has 2 cores)
: "${CTX:=8192}"                       # KV cells in the one unified pool
: "${PARALLEL:=16}"                    # sequence ids / slots
: "${MAX_OUTPUT:=512}"                 # server-wide output cap (the chat workload clips max_tokens to 512)
: "${SLO_MS:=4000}"                    # E2E SLO for goodput
: "${TIMEOUT_S:=20}"                   # client timeout, 5x the SLO: slow requests are censored, not lost
: "${WARMUP_S:=5}"                     # arrivals in the first WARMUP_S seconds are flagged, not counted
: "${SEED:=7}"
: "${TOKENS_PER_WORD:=1.15}"           # small model: usage.prompt_tokens / estimate, measured (docs/benchmarks.md)
: "${READY_TIMEOUT_S:=120}"

# wait_ready URL PATH PID: poll until URL/PATH answers 200; fail if the process died or it took too long.
wait_ready() {
  local url=$1 path=$2 pid=$3 t0=$SECONDS
  until curl -sf -o /dev/null "$url$path"; do
    if ! kill -0 "$pid" 2>/dev/null; then echo "server $pid exited before it was ready" >&2; return 1; fi
    if (( SECONDS - t0 > READY_TIMEOUT_S )); then echo "server $pid not ready after ${READY_TIMEOUT_S}s" >&2; return 1; fi
    sleep 0.5
  done
}

# stop_server PID: SIGTERM, then SIGKILL after 15 s (a drain that never ends must not stall the sweep).
stop_server() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# start_headroom PORT LOG FLAGS...: Headroom engine mode on MODEL; prints the pid. HEADROOM_BIN
# runs another checkout's CLI (an A/B of two commits in one rotation; default bin/headroom.mjs).
# Every server starts fresh: --admission-state off unless FLAGS name a state directory (a server on
# a fixed port otherwise keeps its state under ~/.local/state and the next run would start warm).
start_headroom() {
  local port=$1 log=$2; shift 2
  local fresh=(--admission-state off)
  # Another checkout's CLI (+before) starts fresh too when it knows the flag; one from before
  # persistence existed has no state to start from.
  if [[ " $* " == *" --admission-state "* ]]; then fresh=(); fi
  if [[ -n ${HEADROOM_BIN:-} ]] && ! grep -q -- "'--admission-state" "$(dirname "$HEADROOM_BIN")/../src/cli/commands/serve-options.ts" 2>/dev/null; then fresh=(); fi
  node "${HEADROOM_BIN:-bin/headroom.mjs}" serve --host 127.0.0.1 --port "$port" --model "$MODEL" --threads "$THREADS" \
    --ctx "$CTX" --parallel "$PARALLEL" --max-output-tokens "$MAX_OUTPUT" "${fresh[@]}" "$@" >"$log" 2>&1 &
  echo $!
}

# checkout_for CONFIG: a configuration tagged +before (e.g. headroom-admit+before) runs from another
# checkout's CLI, BEFORE_BIN=<checkout>/bin/headroom.mjs (HEADROOM_BIN); any other from this one.
checkout_for() {
  if [[ $1 == *+before ]]; then export HEADROOM_BIN=${BEFORE_BIN:?set BEFORE_BIN for $1}; else unset HEADROOM_BIN; fi
}

# warm_start: sets the array `warm` to the flags that start Headroom's admission from an artifact
# trained on the workload's traces (ARTIFACT), calibrated on held-out ones (CAL_TRACES); empty
# without ARTIFACT (the online bound from a cold start).
warm_start() {
  warm=()
  if [[ -n ${ARTIFACT:-} ]]; then
    warm=(--admission-artifact "$ARTIFACT")
    if [[ -n ${CAL_TRACES:-} ]]; then warm+=(--admission-calibration-traces "$CAL_TRACES"); fi
  fi
}

# bench_open URL OUT RATE: one open-loop Poisson run of the chat workload into OUT
# (records.parquet, schedule.parquet, meta.json, summary.json). A failed run is reported, not fatal.
# BENCH_FLAGS (split on spaces) go to `bench run` as well, e.g. --eos-token-id 260 --vocab-size 8000.
bench_open() {
  local url=$1 out=$2 rate=$3
  mkdir -p "$out"
  # --model is left out: the harness sends the first name GET /v1/models gives (both servers have it).
  node bin/headroom.mjs bench run --url "$url" --workload "${WORKLOAD:-chat}" --loop open --arrival poisson \
    --rate "$rate" --duration-s "$DURATION_S" --warmup-s "$WARMUP_S" --timeout-s "$TIMEOUT_S" --seed "$SEED" \
    --tokens-per-word "$TOKENS_PER_WORD" --slo "$SLO_MS" --out "$out" --no-progress --json ${BENCH_FLAGS:-} >"$out/summary.json" || echo "bench run failed: $out" >&2
}

# llama-server listens on port+1; bench/peer/chat-proxy.ts on port adds a logit_bias banning the
# byte-fallback tokens (llama-server fails any completion whose text is malformed UTF-8, which a
# random-weight model produces; see the proxy's header). Prints both pids.
# start_llama PORT LOG [FLAGS...]: extra FLAGS go to llama-server, after $LLAMA_FLAGS (from the
# environment, split on spaces: e.g. LLAMA_FLAGS=-v for its debug log).
start_llama() {
  local port=$1 log=$2
  "$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port $((port + 1)) -t "$THREADS" -tb "$THREADS" \
    -c "$CTX" -np "$PARALLEL" --kv-unified --cont-batching --no-webui ${LLAMA_FLAGS:-} "${@:3}" >"$log" 2>&1 &
  local server=$!
  node --import tsx bench/peer/chat-proxy.ts --port "$port" --upstream "http://127.0.0.1:$((port + 1))" >"${log%.log}-proxy.log" 2>&1 &
  echo "$server $!"
}

# run_peer PORT DIR RATE SYSTEM [FLAGS...]: one open-loop run against a fresh server, SYSTEM
# `headroom` (FLAGS go to `headroom serve`) or `llama-server` (behind chat-proxy.ts); records the
# load average before and after in DIR/loadavg.txt. A server that never gets ready is reported.
run_peer() {
  local port=$1 dir=$2 rate=$3 system=$4 pid proxy= ready; shift 4
  mkdir -p "$dir"
  echo "before $(cut -d' ' -f1-3 /proc/loadavg)" >"$dir/loadavg.txt"
  if [[ $system == headroom ]]; then
    # RECORD=1: the server's flight recording goes to $dir/recording (docs/observability.md).
    local record=()
    if [[ ${RECORD:-0} == 1 ]]; then record=(--record "$dir/recording"); fi
    pid=$(start_headroom "$port" "$dir/server.log" "$@" "${record[@]}")
    ready=/ready
  else
    read -r pid proxy < <(start_llama "$port" "$dir/server.log")
    ready=/health
  fi
  if wait_ready "http://127.0.0.1:$port" "$ready" "$pid"; then
    bench_open "http://127.0.0.1:$port" "$dir" "$rate"
    # Headroom's own account of the run (cache hits, adopted blocks, step times), kept beside it.
    if [[ $system == headroom ]]; then curl -sf "http://127.0.0.1:$port/stats" >"$dir/stats.json" || rm -f "$dir/stats.json"; fi
  fi
  stop_server "$pid"
  if [[ -n $proxy ]]; then stop_server "$proxy"; fi
  echo "after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$dir/loadavg.txt"
}
