#!/usr/bin/env bash
# Where the replayer's dispatcher stands still at a high rate on one pinned
# client core: replays RATE req/s for DURATION s against bench/fastsse
# (server on core 0, client on core 1), three ways:
#   1. plain: lateness p50/p99/max, the requests sent more than 0.5 ms late
#      and the episodes they formed (bench/episodes), the time the
#      hypervisor took the client's core meanwhile (steal), and the
#      collections (GODEBUG=gctrace=1);
#   2. with --exectrace: the dispatcher's scheduling delay (runnable,
#      waiting for a P) per 4 s of sending, and its stalls by cause
#      (bench/stalls);
#   3. under `perf sched record` where perf is installed and permitted: the
#      scheduler's wake-up delays per thread on the client core.
# Tracing perturbs timing: quote lateness from the plain run only. Before
# the plain run, bench/clockfloor prints the floor on the client's core at
# the same rate (a thread spinning on the clock, and one sleeping until each
# deadline, with the share of its deadlines met over 0.5 ms late): the
# lateness the machine alone causes.
#
#   bench/dispatcher-stalls.sh                 # RATE=10000 DURATION=10
#   RATE=5000 DURATION=5 bench/dispatcher-stalls.sh
#   SLOWCORE=1 bench/dispatcher-stalls.sh      # on a slowed client core
#
# SLOWCORE=1 runs bench/corehog on the client's core throughout, as
# bench/vegeta-compare.sh does (SLOW_SHARE, SLOW_PERIOD, SLOW_NICE).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
RATE=${RATE:-10000}
DURATION=${DURATION:-10}
PORT=${PORT:-18091}
WORK=$(mktemp -d)
HOG=""
trap 'kill $(cat "$WORK/server.pid" 2>/dev/null) $HOG 2>/dev/null || true; rm -rf "$WORK"' EXIT

go build -o "$WORK/tokentrace" ./cmd/tokentrace
go build -o "$WORK/fastsse" ./bench/fastsse
go build -o "$WORK/stalls" ./bench/stalls
go build -o "$WORK/clockfloor" ./bench/clockfloor
go build -o "$WORK/episodes" ./bench/episodes
go build -o "$WORK/corehog" ./bench/corehog
PIN_S="" PIN_C="" PERF_CPUS="-a"
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then PIN_S="taskset -c 0"; PIN_C="taskset -c 1"; PERF_CPUS="-C 1"; fi
$PIN_S "$WORK/fastsse" -addr "127.0.0.1:$PORT" -tokens 4 2>"$WORK/server.log" &
echo $! >"$WORK/server.pid"
bench_wait_port dispatcher-stalls "127.0.0.1:$PORT"
N=$((RATE * DURATION))
awk -v n="$N" -v r="$RATE" 'BEGIN{for(i=0;i<n;i++) printf "{\"seq\":%d,\"arrival_ns\":%.0f,\"input_tokens\":8,\"output_tokens\":4}\n", i, i*1e9/r}' >"$WORK/trace.jsonl"
replay() {
  $PIN_C "$@" replay --url "http://127.0.0.1:$PORT" --model m --quiet --max-lateness 1h --warmup 100 \
    --out "$WORK/res.jsonl" "$WORK/trace.jsonl"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
bench_slow_core_desc
HOG=$(bench_slow_core "$WORK/corehog" "${PIN_C#taskset -c }" $((6 * DURATION + 120)))
echo "== plain run, $RATE req/s for $DURATION s, after the floor on the client's core"
$PIN_C "$WORK/clockfloor" -rate "$RATE" -duration 3s 2>/dev/null
$PIN_C "$WORK/clockfloor" -sleep -rate "$RATE" -duration 3s 2>/dev/null
ST0=$(bench_steal_ms "${PIN_C#taskset -c }")
GODEBUG=gctrace=1 replay "$WORK/tokentrace" 2>"$WORK/gc.txt" | grep -E '^(lateness|realtime|client)' || true
ST1=$(bench_steal_ms "${PIN_C#taskset -c }")
"$WORK/episodes" "$WORK/res.jsonl"
echo "steal      $(echo "$ST1 - $ST0" | bc) ms of the client's core taken by the hypervisor during the run"
echo "collections during the run: $(grep -c '^gc ' "$WORK/gc.txt")"
grep '^gc ' "$WORK/gc.txt" | sed 's/^/  /' | cut -c1-110 | head -5

echo "== with --exectrace"
replay "$WORK/tokentrace" --exectrace "$WORK/run.trace" | grep '^lateness' || true
"$WORK/stalls" -min 200us "$WORK/run.trace"

if command -v perf >/dev/null && perf sched record -o "$WORK/probe.data" -- true >/dev/null 2>&1; then
  echo "== under perf sched (client core)"
  perf sched record $PERF_CPUS -o "$WORK/perf.data" -- bash -c "$(declare -f replay); WORK=$WORK PORT=$PORT PIN_C='$PIN_C'; replay $WORK/tokentrace" 2>/dev/null | grep '^lateness' || true
  perf sched latency --pids -i "$WORK/perf.data" --sort max 2>/dev/null | head -12
else
  echo "== perf sched: not installed or not permitted here, skipped"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
