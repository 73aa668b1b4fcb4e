#!/usr/bin/env bash
# Does what the prefix cache retains slow every step? llama.cpp attends over the whole used range
# of the unified pool, and rung 4's cache keeps 60-70% of it after a run (docs/benchmarks.md).
# Rung 4 with --cache-max-fraction 1 (keep all) vs 0.25, interleaved (order alternating), one fresh
# server per run, same workload and seed as bench/peer/compare.sh.
#
#   DURATION_S=50 bash bench/cache/retention.sh [rate] [repeats]
#   node --import tsx bench/peer/table.ts --slo 4000 results/cache-retention/*/*
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/ladder/lib.sh
rate=${1:-0.6}
repeats=${2:-2}
: "${DURATION_S:=50}"
port=8331
out=results/cache-retention/rate-$rate
fractions=(1 0.25)
for (( r = 0; r < repeats; r++ )); do
  for k in 0 1; do
    f=${fractions[$(( (k + r) % 2 ))]}
    dir=$out/keep-$f-run$r
    mkdir -p "$dir"
    echo "before $(cut -d' ' -f1-3 /proc/loadavg)" >"$dir/loadavg.txt"
    pid=$(start_headroom $port "$dir/server.log" --scheduler continuous --kv paged --prefix-cache on --cache-max-fraction "$f")
    if wait_ready "http://127.0.0.1:$port" /ready "$pid"; then
      bench_open "http://127.0.0.1:$port" "$dir" "$rate"
      curl -s "http://127.0.0.1:$port/stats" >"$dir/stats-after.json" || true
    fi
    stop_server "$pid"
    echo "after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$dir/loadavg.txt"
    echo "run $r keep-$f done"
  done
done
