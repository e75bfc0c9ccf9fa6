#!/usr/bin/env bash
# Compare tokentrace replay with vegeta at the same constant rate against the
# same fast local SSE server (bench/fastsse): schedule lateness p50/p99/max
# and client CPU per request. Loopback only.
#
# Just before each client's run, bench/clockfloor measures the floor on the
# client's core at the same rate for FLOOR_SECONDS (default 3): the
# lateness of a thread that only reads the clock (floor_p99, floor_max) and
# of one that sleeps until each deadline as the dispatcher does (wake_p99,
# wake_max). Lateness above the floor is the client's own; the floor is
# the machine's (other processes, the hypervisor, wake-up latency).
#
#   bench/vegeta-compare.sh                 # RATES="1000 5000" DURATION=10
#   RATES=2000 DURATION=5 bench/vegeta-compare.sh
#   REPEAT=3 bench/vegeta-compare.sh        # each pair of runs 3 times
#   SLOWCORE=1 RATES=5000 bench/vegeta-compare.sh   # on a slowed client core
#
# The sleeping floor's own share of deadlines met over 0.5 ms late is
# wake_late, and steal_ms is the time the hypervisor took the client's
# virtual CPU during the client's run (bench_steal_ms, in 10 ms steps): on
# a virtual machine with busy neighbours these set a late share that no
# client goes below.
#
# Beside the percentiles each run prints the client's share of its core
# (core_pct: CPU time over the client's wall time), how many requests were
# sent more than 0.5 ms late (late_0.5ms) and how many separate episodes
# they formed (bench/episodes; vegetalate for vegeta): a few late sends
# spread out are the machine's, many in episodes at a steady interval are
# the client's own (something that grows until it is flushed).
#
# SLOWCORE=1 reproduces a slower or shared virtual CPU on the machine at
# hand: bench/corehog spins SLOW_SHARE (default 0.5) of every SLOW_PERIOD
# (default 10ms) at nice SLOW_NICE (default 5) on the client's core
# during each floor measurement and client run.
#
# Shared or virtualised machines vary from run to run (CPU per request by
# up to 30% here); REPEAT alternates the two clients so both see the same
# conditions.
#
# On a machine with >= 2 cores the server is pinned to core 0 and the
# client to core 1 (taskset), as in the client-overhead study. vegeta is
# installed from the Go module proxy (pinned VEGETA_VERSION) into a scratch
# GOBIN.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
RATES=${RATES:-"1000 5000"}
DURATION=${DURATION:-10}
REPEAT=${REPEAT:-1}
PORT=${PORT:-18089}
WORK=$(mktemp -d)
HOG=""
trap 'kill $(cat "$WORK/server.pid" 2>/dev/null) $HOG 2>/dev/null || true; rm -rf "$WORK"' EXIT

# vegeta from the Go module proxy. "go install ...@latest" needs the proxy's
# version list, which some proxies refuse; a pinned version through a scratch
# module needs only that version.
VEGETA_VERSION=${VEGETA_VERSION:-v12.12.0}
mkdir -p "$WORK/vg"
(cd "$WORK/vg" && go mod init vegetabench >/dev/null 2>&1 &&
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/tsenart/vegeta/v12"\n' >tools.go &&
  go get "github.com/tsenart/vegeta/v12@$VEGETA_VERSION" >/dev/null 2>&1 &&
  GOBIN="$WORK/bin" go install github.com/tsenart/vegeta/v12)
go build -o "$WORK/bin/tokentrace" ./cmd/tokentrace
go build -o "$WORK/bin/fastsse" ./bench/fastsse
go build -o "$WORK/bin/vegetalate" ./bench/vegetalate
go build -o "$WORK/bin/clockfloor" ./bench/clockfloor
go build -o "$WORK/bin/episodes" ./bench/episodes
go build -o "$WORK/bin/corehog" ./bench/corehog
FLOOR_SECONDS=${FLOOR_SECONDS:-3}
PIN_S="" PIN_C="" CORE_C=""
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then PIN_S="taskset -c 0"; PIN_C="taskset -c 1"; CORE_C=1; fi

$PIN_S "$WORK/bin/fastsse" -addr "127.0.0.1:$PORT" -tokens 4 2>"$WORK/server.log" &
echo $! >"$WORK/server.pid"
bench_wait_port vegeta-compare "127.0.0.1:$PORT"
URL="http://127.0.0.1:$PORT"
# The body tokentrace sends for an 8-token prompt, 4 output tokens.
BODY='{"model":"m","prompt":[1234,5678,9012,3456,7890,1357,2468,3579],"max_tokens":4,"ignore_eos":true,"min_tokens":4,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":false}}'
B64=$(printf '%s' "$BODY" | base64 -w0)
printf '{"method":"POST","url":"%s/v1/completions","body":"%s","header":{"Content-Type":["application/json"],"Accept":["text/event-stream"]}}\n' "$URL" "$B64" >"$WORK/targets.json"

# floor RATE: prints "floor_p99 floor_max wake_p99 wake_max wake_late"
# measured on the client's core.
floor() {
  local f w
  f=$($PIN_C "$WORK/bin/clockfloor" -rate "$1" -duration "${FLOOR_SECONDS}s" 2>/dev/null)
  w=$($PIN_C "$WORK/bin/clockfloor" -sleep -rate "$1" -duration "${FLOOR_SECONDS}s" 2>/dev/null)
  echo "$(echo "$f" | awk '{print $5, $7}') $(echo "$w" | awk '{print $5, $7, $9}')"
}

# hog_start / hog_stop: the slowed core (SLOWCORE) for one client's floor
# and run.
hog_start() { HOG=$(bench_slow_core "$WORK/bin/corehog" "${PIN_C#taskset -c }" $((DURATION + 2 * FLOOR_SECONDS + 60))); }
hog_stop() {
  if [ -n "$HOG" ]; then kill "$HOG" 2>/dev/null || true; wait "$HOG" 2>/dev/null || true; fi
  HOG=""
}

# row CLIENT RATE LATENESS_LINE EPISODES_LINE USER SYS WALL: one line of the
# table (FP FM WP WM WL: the floor; ST0 and ST1: the client core's steal
# before and after the run).
row() {
  printf '%-10s %8s %12s %12s %12s %10s %10s %10s %10s %9s %14.1f %8.1f %12s %9s %8s %6s\n' "$1" "$2" \
    "$(echo "$3" | awk '{print $3}')" "$(echo "$3" | awk '{print $5}')" "$(echo "$3" | awk '{print $7}')" \
    "$FP" "$FM" "$WP" "$WM" "$WL" "$(echo "($5 + $6) * 1000000 / $N" | bc -l)" "$(echo "($5 + $6) * 100 / $7" | bc -l)" \
    "$(echo "$4" | awk '{print $3}')" "$(echo "$4" | awk '{print $8}')" "$(echo "$ST1 - $ST0" | bc)" "$(cut -d' ' -f1 /proc/loadavg)"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
bench_slow_core_desc
printf '%-10s %8s %12s %12s %12s %10s %10s %10s %10s %9s %14s %8s %12s %9s %8s %6s\n' client rate late_p50 late_p99 late_max floor_p99 floor_max wake_p99 wake_max wake_late cpu_us_per_req core_pct late_0.5ms episodes steal_ms load
for RATE in $RATES; do
for _ in $(seq "$REPEAT"); do
  N=$((RATE * DURATION))
  awk -v n="$N" -v r="$RATE" 'BEGIN{for(i=0;i<n;i++) printf "{\"seq\":%d,\"arrival_ns\":%.0f,\"input_tokens\":8,\"output_tokens\":4}\n", i, i*1e9/r}' >"$WORK/trace.jsonl"

  # tokentrace replay
  hog_start
  read -r FP FM WP WM WL <<<"$(floor "$RATE")"
  ST0=$(bench_steal_ms "$CORE_C")
  /usr/bin/time -f "%U %S %e" -o "$WORK/tt.time" $PIN_C "$WORK/bin/tokentrace" replay --url "$URL" --model m --quiet \
    --max-lateness 1h --warmup 100 --out "$WORK/res.jsonl" "$WORK/trace.jsonl" >"$WORK/tt.out"
  ST1=$(bench_steal_ms "$CORE_C")
  hog_stop
  read -r U S E <"$WORK/tt.time"
  row tokentrace "$RATE" "$(grep '^lateness' "$WORK/tt.out")" "$("$WORK/bin/episodes" "$WORK/res.jsonl")" "$U" "$S" "$E"

  # vegeta at the same rate, same duration
  hog_start
  read -r FP FM WP WM WL <<<"$(floor "$RATE")"
  ST0=$(bench_steal_ms "$CORE_C")
  /usr/bin/time -f "%U %S %e" -o "$WORK/vg.time" $PIN_C "$WORK/bin/vegeta" attack -format=json -targets="$WORK/targets.json" \
    -rate="$RATE/s" -duration="${DURATION}s" -max-body=-1 -output="$WORK/vg.bin"
  ST1=$(bench_steal_ms "$CORE_C")
  hog_stop
  read -r U S E <"$WORK/vg.time"
  "$WORK/bin/vegeta" encode -to json "$WORK/vg.bin" | "$WORK/bin/vegetalate" -rate "$RATE" >"$WORK/vg.out"
  row vegeta "$RATE" "$(grep '^lateness' "$WORK/vg.out")" "$(grep '^episodes' "$WORK/vg.out")" "$U" "$S" "$E"
done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
