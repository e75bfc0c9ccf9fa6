#!/usr/bin/env bash
# Replay timing beside busy neighbours: HOGS bounded busy-loop processes
# share the machine with the replayer and a simulator in another process,
# as when replay runs beside other pods or builds. Each run prints the
# lateness line of replay's summary and whether the dispatcher got the
# real-time class (metadata replay.realtime), with the load average.
#
#   bench/neighbours.sh                          # 100 req/s, 30 s, 2 hogs, 3 runs
#   RATE=1000 HOGS=4 REPEAT=1 bench/neighbours.sh
#   REPLAY_FLAGS=--no-realtime bench/neighbours.sh   # the same without SCHED_FIFO
#
# Environment: RATE (req/s, default 100), DURATION (default 30s), HOGS
# (default 2), REPEAT (default 3), REPLAY_FLAGS (extra replay flags).
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-100}
DURATION=${DURATION:-30s}
HOGS=${HOGS:-2}
REPEAT=${REPEAT:-3}
REPLAY_FLAGS=${REPLAY_FLAGS:-}
. bench/lib.sh
bench_work neighbours

go build -o "$WORK/tokentrace" ./cmd/tokentrace
TT="$WORK/tokentrace"
secs=${DURATION%s}
n=$((RATE * secs))
awk -v n="$n" -v rate="$RATE" 'BEGIN { for (i = 0; i < n; i++) printf "{\"seq\":%d,\"arrival_ns\":%.0f,\"input_tokens\":64,\"output_tokens\":16}\n", i, i * 1e9 / rate }' >"$WORK/trace.jsonl"

"$TT" sim --listen 127.0.0.1:18095 >"$WORK/sim.out" 2>&1 &
PIDS+=($!)
sleep 1

for r in $(seq "$REPEAT"); do
	hogs=()
	for _ in $(seq "$HOGS"); do
		# bounded: a hog never outlives the run by more than 10 s
		timeout $((secs + 10)) sh -c 'while :; do :; done' &
		hogs+=($!)
		PIDS+=($!)
	done
	sleep 1
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	# shellcheck disable=SC2086
	"$TT" replay --quiet --url http://127.0.0.1:18095 --max-lateness 1h --out "$WORK/res.parquet" $REPLAY_FLAGS "$WORK/trace.jsonl" >"$WORK/replay.out" 2>"$WORK/replay.err" || true
	for h in "${hogs[@]}"; do kill "$h" 2>/dev/null || true; done
	rt=$("$TT" inspect --json "$WORK/res.parquet" | sed -n 's/.*"replay.realtime": *"\([^"]*\)".*/\1/p' | head -1)
	printf 'run %d  %d req/s  %d hogs  load %s  %s  realtime: %s\n' "$r" "$RATE" "$HOGS" "$load" "$(grep lateness "$WORK/replay.out")" "${rt:-?}"
	grep -h "without the real-time class" "$WORK/replay.err" || true
done
