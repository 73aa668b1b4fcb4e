#!/usr/bin/env bash
# Mixed-size overload (issue 9, "Make room"): does KV allocation thrash when 512/2,048/8,192-token
# prompts (the `mixed` workload, scaled to the pool) share one pool? Per configuration, one fresh
# server each:
#   1. closed loop, CONC workers, DURATION_S: the capacity on this workload (labelled closed loop);
#   2. open loop, Poisson at RATE (set it to ~3x the capacity), DURATION_S, once per client timeout
#      in OPEN_TIMEOUTS_S: 30 s as in the issue (clients give up; work on them is lost), and 120 s
#      (nobody gives up during the run: what is left is the KV allocation's own efficiency).
# /stats is saved before and after each run (preemption count). The table (bench/kv/table.ts) reads
# completions whose end falls inside the steady window, so a backlog drained after the arrivals stop
# does not inflate throughput.
#
#   RUNNER=mock RATE=9 bash bench/kv/mixed-overload.sh LABEL
#   RUNNER=llama THREADS=1 CTX=4096 RATE=... bash bench/kv/mixed-overload.sh LABEL
#   node --import tsx bench/kv/table.ts results/kv-mixed-overload/*/*
#
# OUT_ROOT overrides where results go (the "before" run executes an older tree with OUT_ROOT
# pointing back into this one).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${TIMEOUT_S:=30}"               # closed loop (before lib.sh, whose default is 20)
source bench/ladder/lib.sh
label=${1:?usage: mixed-overload.sh LABEL}
: "${RUNNER:=mock}"
: "${CONC:=8}"
: "${RATE:?set RATE (open-loop arrivals per second, ~3x the closed-loop capacity)}"
: "${DURATION_S:=40}"
: "${OPEN_TIMEOUTS_S:=30 120}"
: "${MOCK_TOKENS_PER_WORD:=3.8}"   # the mock tokenizer: usage.prompt_tokens / estimate, measured
: "${OUT_ROOT:=results/kv-mixed-overload}"
port=8341
out=$OUT_ROOT/$RUNNER-ctx$CTX/$label
if [[ $RUNNER == mock ]]; then
  flags=(--runner mock); tpw=$MOCK_TOKENS_PER_WORD
else
  flags=(--runner llama --model "$MODEL" --threads "$THREADS"); tpw=$TOKENS_PER_WORD
fi
run_point() {
  local name=$1 timeout=$2; shift 2
  local dir=$out/$name pid
  mkdir -p "$dir"
  echo "before $(cut -d' ' -f1-3 /proc/loadavg)" >"$dir/loadavg.txt"
  node bin/headroom.mjs serve --host 127.0.0.1 --port $port "${flags[@]}" --ctx "$CTX" --parallel "$PARALLEL" \
    --max-output-tokens "$MAX_OUTPUT" --scheduler continuous --admission-state off >"$dir/server.log" 2>&1 &
  pid=$!
  if wait_ready "http://127.0.0.1:$port" /ready "$pid"; then
    curl -s "http://127.0.0.1:$port/stats" >"$dir/stats-before.json" || true
    node bin/headroom.mjs bench run --url "http://127.0.0.1:$port" --workload mixed --context-tokens "$CTX" \
      --duration-s "$DURATION_S" --warmup-s "$WARMUP_S" --timeout-s "$timeout" --seed "$SEED" \
      --tokens-per-word "$tpw" --slo "$SLO_MS" --out "$dir" --no-progress --json "$@" >"$dir/summary.json" || echo "bench run failed: $dir" >&2
    curl -s "http://127.0.0.1:$port/stats" >"$dir/stats-after.json" || true
  fi
  stop_server "$pid"
  echo "after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$dir/loadavg.txt"
  echo "$label $name done"
}
# SKIP_CLOSED=1 reruns only the open-loop points; OPEN_TIMEOUTS_S=" " only the closed loop.
[[ ${SKIP_CLOSED:-0} == 1 ]] || run_point "closed-c$CONC" "$TIMEOUT_S" --loop closed --concurrency "$CONC"
for t in $OPEN_TIMEOUTS_S; do
  run_point "open-r$RATE-t$t" "$t" --loop open --arrival poisson --rate "$RATE"
done
